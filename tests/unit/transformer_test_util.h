// Shared helpers for the transformer tests: tiny model configs and a deterministic loss.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "model/weights.h"

namespace test {

// A tiny model of the given architecture: GQA (4 query heads over 2 kv heads), q_dim != hidden.
inline hone::ModelConfig tiny_config(hone::Architecture arch, bool tied) {
  hone::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 40;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6f;
  c.rope.head_dim = 8;
  c.rope.theta = 10000.f;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == hone::Architecture::qwen2;
  c.qk_norm = arch == hone::Architecture::qwen3;
  return c;
}

// A tiny Qwen3-MoE: two sparse layers around a dense one (mlp_only_layers), 4 experts, 2 per token.
inline hone::ModelConfig tiny_moe_config(bool norm_topk_prob) {
  hone::ModelConfig c = tiny_config(hone::Architecture::qwen3, false);
  c.arch = hone::Architecture::qwen3_moe;
  c.num_hidden_layers = 3;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 8;
  c.norm_topk_prob = norm_topk_prob;
  c.mlp_only_layers = {1};
  c.validate();
  return c;
}

// Weights with non-trivial values everywhere: larger than the usual init so every path carries gradient, and
// norm weights and biases perturbed away from 1 and 0.
inline void randomize(hone::ModelWeights& w, uint64_t seed, float std = 0.3f) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> nd(0.f, std);
  for (auto& [name, t] : w.named_parameters()) {
    const bool is_norm = name.find("norm") != std::string::npos;
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = is_norm ? 1.f + nd(rng) : nd(rng);
  }
}

inline std::vector<std::vector<int32_t>> random_sequences(const std::vector<int>& lengths, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ud(0, vocab - 1);
  std::vector<std::vector<int32_t>> seqs;
  for (int n : lengths) {
    std::vector<int32_t> s(static_cast<size_t>(n));
    for (auto& x : s) x = ud(rng);
    seqs.push_back(s);
  }
  return seqs;
}

// Loss weights for logprob and entropy rows: c_t = 1 + 0.1 (t mod 5), e_t = 0.3 - 0.05 (t mod 3).
inline std::vector<float> logprob_weights(int T) {
  std::vector<float> c(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) c[size_t(t)] = 1.f + 0.1f * float(t % 5);
  return c;
}
inline std::vector<float> entropy_weights(int T) {
  std::vector<float> c(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) c[size_t(t)] = 0.3f - 0.05f * float(t % 3);
  return c;
}

// sum_t c_t logprob_t + e_t entropy_t, accumulated in double.
inline double weighted_loss(hone::Transformer& m, const hone::PackedBatch& b, float temperature) {
  m.forward(b, temperature, true);
  const int T = b.num_tokens();
  const auto c = logprob_weights(T), e = entropy_weights(T);
  double L = 0;
  for (int t = 0; t < T; ++t) L += double(c[size_t(t)]) * m.logprobs()[t] + double(e[size_t(t)]) * m.entropy()[t];
  return L;
}

}  // namespace test
