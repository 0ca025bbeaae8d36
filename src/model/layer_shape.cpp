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

LayerShape layer_shape(const ModelConfig& c, int tp, int tp_rank, int ep, int ep_rank) {
  HONE_USER_CHECK(tp >= 1, "parallel.tp must be at least 1 (got ", tp, ")");
  HONE_USER_CHECK(ep >= 1, "parallel.ep must be at least 1 (got ", ep, ")");
  HONE_CHECK(tp_rank >= 0 && tp_rank < tp, "tensor-parallel rank ", tp_rank, " outside [0, ", tp, ")");
  HONE_CHECK(ep_rank >= 0 && ep_rank < ep, "expert-parallel rank ", ep_rank, " outside [0, ", ep, ")");
  const int Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  // The widths tp splits: the dense MLP's where a layer has one, the experts' in a mixture of experts.
  const bool dense = c.has_dense_layers();
  const int I = dense ? c.intermediate_size : c.moe_intermediate_size;
  const int Im = c.is_moe() ? c.moe_intermediate_size : I;
  HONE_USER_CHECK(Hq % tp == 0, "parallel.tp = ", tp, " does not divide the ", Hq,
                  " attention heads (num_attention_heads); tp = ", working_tp({Hq, I, Im}), " would");
  HONE_USER_CHECK(I % tp == 0, "parallel.tp = ", tp, " does not divide the intermediate size ", I,
                  dense ? " (intermediate_size)" : " (moe_intermediate_size)", "; tp = ", working_tp({Hq, I, Im}),
                  " would");
  HONE_USER_CHECK(Im % tp == 0, "parallel.tp = ", tp, " does not divide the experts' intermediate size ", Im,
                  " (moe_intermediate_size); tp = ", working_tp({Hq, I, Im}), " would");
  HONE_USER_CHECK(Hkv % tp == 0 || tp % Hkv == 0, "parallel.tp = ", tp, " neither divides the ", Hkv,
                  " KV heads (num_key_value_heads) nor is a multiple of them; tp = ", working_tp({Hq, I, Im}),
                  " would, where it divides ", Hkv, " or is a multiple of it");
  if (c.is_moe()) {
    HONE_USER_CHECK(c.num_experts % ep == 0, "parallel.ep = ", ep, " does not divide the ", c.num_experts,
                    " experts (num_experts); ep = ", working_tp({c.num_experts}), " would");
  } else {
    HONE_USER_CHECK(ep == 1, "parallel.ep = ", ep, ": the model has no experts (expert parallelism needs a mixture "
                    "of experts such as Qwen3MoeForCausalLM); set parallel.ep = 1");
  }
  LayerShape s;
  s.hidden = c.hidden_size;
  s.heads = Hq / tp;
  s.kv_heads = Hkv % tp == 0 ? Hkv / tp : 1;
  s.head_dim = c.head_dim;
  s.intermediate = dense ? c.intermediate_size / tp : 0;
  const int padded = (c.vocab_size + tp - 1) / tp * tp;
  s.vocab = padded / tp;
  s.vocab_begin = tp_rank * s.vocab;
  s.vocab_total = c.vocab_size;
  s.qk_norm = c.qk_norm;
  s.bias = c.attention_bias;
  s.eps = c.rms_norm_eps;
  s.tp = tp;
  s.tp_rank = tp_rank;
  if (c.is_moe()) {
    s.experts_total = c.num_experts;
    s.experts = c.num_experts / ep;
    s.expert_begin = ep_rank * s.experts;
    s.top_k = c.num_experts_per_tok;
    s.moe_intermediate = c.moe_intermediate_size / tp;
    s.norm_topk_prob = c.norm_topk_prob;
  }
  s.ep = ep;
  s.ep_rank = ep_rank;
  return s;
}

}  // namespace hone
