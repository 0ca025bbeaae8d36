// LayerShape from the config and the tensor-parallel size (the split: layer_shape.h).
#include "model/layer_shape.h"

#include <cmath>
#include <string>

#include "model/model_config.h"
#include "runtime/error.h"

namespace hone {

float LayerShape::attention_scale() const { return 1.f / std::sqrt(float(head_dim)); }

namespace {

// "1, 2, 4 or 8": the tensor-parallel sizes up to 64 that divide every one of the given sizes.
std::string working_tp(std::initializer_list<int> sizes) {
  std::string s;
  int last = 0;
  for (int t = 1; t <= 64; ++t) {
    bool ok = true;
    for (int n : sizes) ok = ok && n % t == 0;
    if (!ok) continue;
    if (last) s += (s.empty() ? "" : ", ") + std::to_string(last);
    last = t;
  }
  return s.empty() ? std::to_string(last) : s + " or " + std::to_string(last);
}

}  // namespace

LayerShape layer_shape(const ModelConfig& c, int tp, int tp_rank) {
  HONE_USER_CHECK(tp >= 1, "parallel.tp must be at least 1 (got ", tp, ")");
  HONE_CHECK(tp_rank >= 0 && tp_rank < tp, "tensor-parallel rank ", tp_rank, " outside [0, ", tp, ")");
  const int Hq = c.num_attention_heads, Hkv = c.num_key_value_heads, I = c.intermediate_size;
  HONE_USER_CHECK(Hq % tp == 0, "parallel.tp = ", tp, " does not divide the ", Hq,
                  " attention heads (num_attention_heads); tp = ", working_tp({Hq, I}), " would");
  HONE_USER_CHECK(I % tp == 0, "parallel.tp = ", tp, " does not divide the intermediate size ", I,
                  " (intermediate_size); tp = ", working_tp({Hq, I}), " would");
  HONE_USER_CHECK(Hkv % tp == 0 || tp % Hkv == 0, "parallel.tp = ", tp, " neither divides the ", Hkv,
                  " KV heads (num_key_value_heads) nor is a multiple of them; tp = ", working_tp({Hq, I}),
                  " would, where it divides ", Hkv, " or is a multiple of it");
  LayerShape s;
  s.hidden = c.hidden_size;
  s.heads = Hq / tp;
  s.kv_heads = Hkv % tp == 0 ? Hkv / tp : 1;
  s.head_dim = c.head_dim;
  s.intermediate = I / tp;
  const int padded = (c.vocab_size + tp - 1) / tp * tp;
  s.vocab = padded / tp;
  s.vocab_begin = tp_rank * s.vocab;
  s.vocab_total = c.vocab_size;
  s.qk_norm = c.qk_norm;
  s.bias = c.attention_bias;
  s.eps = c.rms_norm_eps;
  s.tp = tp;
  s.tp_rank = tp_rank;
  return s;
}

}  // namespace hone
