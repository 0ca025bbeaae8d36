// Tiny random models and the full-forward reference of the generation tests (see test_generator_util.h).
#include "unit/test_generator_util.h"

#include <algorithm>
#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

namespace test {

using hone::Tensor;

namespace {

hone::ModelConfig tiny_config(TinyKind kind) {
  hone::ModelConfig c;
  c.vocab_size = 29;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 128;
  c.rms_norm_eps = 1e-6f;
  switch (kind) {
    case TinyKind::qwen3_tied:
    case TinyKind::qwen3_untied:
      c.arch = hone::Architecture::qwen3;
      c.num_attention_heads = 4;
      c.num_key_value_heads = 2;
      c.head_dim = 6;  // q_dim 24 != hidden 16, as Qwen3 allows
      c.qk_norm = true;
      c.tie_word_embeddings = kind == TinyKind::qwen3_tied;
      c.rope.theta = 1000000.f;
      break;
    case TinyKind::qwen2_untied:
      c.arch = hone::Architecture::qwen2;
      c.num_attention_heads = 4;
      c.num_key_value_heads = 1;
      c.head_dim = 4;
      c.attention_bias = true;
      c.tie_word_embeddings = false;
      c.num_hidden_layers = 3;
      break;
    case TinyKind::llama_mha:
      c.arch = hone::Architecture::llama;
      c.num_attention_heads = 2;
      c.num_key_value_heads = 2;
      c.head_dim = 8;
      c.tie_word_embeddings = true;
      c.rope.theta = 500000.f;
      c.rope.llama3 = true;
      c.rope.original_max_position_embeddings = 16;
      break;
  }
  c.rope.head_dim = c.head_dim;
  c.eos_token_ids = {1};
  return c;
}

}  // namespace

TinyModel tiny_model(TinyKind kind, uint64_t seed) {
  TinyModel m;
  m.config = tiny_config(kind);
  m.weights = hone::allocate_weights(m.config);
  const std::vector<float> r = random_floats(len(m.weights.flat.numel()), seed, -0.5f, 0.5f);
  std::copy(r.begin(), r.end(), m.weights.flat.f32());
  for (const hone::ParamSpec& spec : m.weights.specs) {
    if (spec.init != hone::ParamInit::ones) continue;
    float* p = m.weights.param(spec).f32();
    for (int64_t j = 0; j < spec.numel(); ++j) p[j] = 1.0f + 0.4f * p[j];  // around 1, but not 1: a dropped norm shows
  }
  return m;
}

namespace {

// Final hidden states [T, C] (after the final norm) of one sequence.
std::vector<float> full_forward_hidden(const TinyModel& m, const std::vector<int32_t>& tokens) {
  namespace cpu = hone::cpu;
  const hone::ModelConfig& c = m.config;
  const hone::ModelWeights& w = m.weights;
  const int T = int(tokens.size()), C = c.hidden_size, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int D = c.head_dim, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
  std::vector<float> x(len(T * C)), xn(len(T * C)), rstd(len(T * Hq)), q(len(T * Q)), k(len(T * KV)),
      v(len(T * KV)), att(len(T * Q)), lse(len(T * Hq)), o(len(T * C)), g(len(T * I)), u(len(T * I)),
      a(len(T * I));
  std::vector<int32_t> pos(len(T)), cu = {0, T};
  for (int t = 0; t < T; ++t) pos[len(t)] = t;
  std::vector<float> inv(len(D / 2));
  cpu::rope_inv_freq(inv.data(), c.rope);
  const float eps = c.rms_norm_eps;
  cpu::embedding_forward(x.data(), tokens.data(), w.embed_tokens.f32(), T, C);
  for (const hone::LayerWeights& l : w.layers) {
    cpu::rmsnorm_forward(xn.data(), rstd.data(), x.data(), l.input_layernorm.f32(), T, C, eps);
    cpu::linear_forward(q.data(), xn.data(), l.q_proj.f32(), c.attention_bias ? l.q_bias.f32() : nullptr, T, C, Q);
    cpu::linear_forward(k.data(), xn.data(), l.k_proj.f32(), c.attention_bias ? l.k_bias.f32() : nullptr, T, C, KV);
    cpu::linear_forward(v.data(), xn.data(), l.v_proj.f32(), c.attention_bias ? l.v_bias.f32() : nullptr, T, C, KV);
    if (c.qk_norm) {
      std::vector<float> qn(q.size()), kn(k.size());
      cpu::rmsnorm_forward(qn.data(), rstd.data(), q.data(), l.q_norm.f32(), T * Hq, D, eps);
      cpu::rmsnorm_forward(kn.data(), rstd.data(), k.data(), l.k_norm.f32(), T * Hkv, D, eps);
      q = qn;
      k = kn;
    }
    cpu::rope_forward(q.data(), q.data(), pos.data(), inv.data(), T, Hq, D);
    cpu::rope_forward(k.data(), k.data(), pos.data(), inv.data(), T, Hkv, D);
    cpu::attention_forward(att.data(), lse.data(), q.data(), k.data(), v.data(), cu.data(), 1, T, Hq, Hkv, D,
                           1.0f / std::sqrt(float(D)));
    cpu::linear_forward(o.data(), att.data(), l.o_proj.f32(), nullptr, T, Q, C);
    cpu::add_forward(x.data(), x.data(), o.data(), int64_t(T) * C);
    cpu::rmsnorm_forward(xn.data(), rstd.data(), x.data(), l.post_attention_layernorm.f32(), T, C, eps);
    cpu::linear_forward(g.data(), xn.data(), l.gate_proj.f32(), nullptr, T, C, I);
    cpu::linear_forward(u.data(), xn.data(), l.up_proj.f32(), nullptr, T, C, I);
    cpu::swiglu_forward(a.data(), g.data(), u.data(), int64_t(T) * I);
    cpu::linear_forward(o.data(), a.data(), l.down_proj.f32(), nullptr, T, I, C);
    cpu::add_forward(x.data(), x.data(), o.data(), int64_t(T) * C);
  }
  cpu::rmsnorm_forward(xn.data(), rstd.data(), x.data(), w.norm.f32(), T, C, eps);
  return xn;
}

const float* head_weight(const TinyModel& m) {
  return (m.config.tie_word_embeddings ? m.weights.embed_tokens : m.weights.lm_head).f32();
}

}  // namespace

std::vector<float> full_forward_logits(const TinyModel& m, const std::vector<int32_t>& tokens) {
  const int T = int(tokens.size()), C = m.config.hidden_size, V = m.config.vocab_size;
  const std::vector<float> h = full_forward_hidden(m, tokens);
  std::vector<float> logits(len(T * V));
  hone::cpu::lm_head_logits(logits.data(), h.data(), head_weight(m), T, C, V);
  return logits;
}

std::vector<float> full_forward_logprobs(const TinyModel& m, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& completion, float temperature) {
  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), completion.begin(), completion.end());
  const int T = int(seq.size()), C = m.config.hidden_size, V = m.config.vocab_size;
  const std::vector<float> h = full_forward_hidden(m, seq);
  // Row t predicts token t + 1: only rows whose next token is a completion token have a target.
  std::vector<int32_t> targets(len(T), -1);
  for (size_t i = 0; i < completion.size(); ++i) targets[prompt.size() - 1 + i] = completion[i];
  std::vector<float> lp(len(T)), lse(len(T));
  hone::cpu::lm_head_logprob_forward(lp.data(), nullptr, lse.data(), h.data(), head_weight(m), targets.data(), T, C,
                                     V, temperature, 7);
  return std::vector<float>(lp.begin() + int64_t(prompt.size()) - 1, lp.begin() + int64_t(T) - 1);
}

}  // namespace test
