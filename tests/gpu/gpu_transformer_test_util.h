// Shared helpers for the whole-model GPU tests: small model shapes the GPU kernels accept (head_dim 64), weights
// rounded to bf16 so the CPU reference sees exactly what the GPU computes with, and comparison measures.
#pragma once

#if HONE_CUDA

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/ops_cuda.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/weights.h"

namespace test {

// A small model: GQA (4 query heads over 2 kv heads), q_dim (256) != hidden (128), vocabulary not a multiple of
// any chunk size, two layers.
inline hone::ModelConfig gpu_tiny_config(hone::Architecture arch, bool tied) {
  hone::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 301;
  c.hidden_size = 128;
  c.intermediate_size = 192;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-6f;
  c.rope.head_dim = 64;
  c.rope.theta = arch == hone::Architecture::qwen3 ? 1e6f : 10000.f;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == hone::Architecture::qwen2;
  c.qk_norm = arch == hone::Architecture::qwen3;
  c.validate();
  return c;
}

inline float bf16_round(float x) { return float(__nv_bfloat16(x)); }

// Normal(0, std) matrices and biases, norm weights 1 + Normal(0, 0.1); every value rounded to bf16.
inline hone::ModelWeights gpu_test_weights(const hone::ModelConfig& c, uint64_t seed, float std = 0.05f) {
  hone::ModelWeights w = hone::allocate_weights(c);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, t] : w.named_parameters()) {
    const bool is_norm = name.find("norm") != std::string::npos;
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_round(is_norm ? 1.f + 0.1f * nd(rng) : std * nd(rng));
  }
  return w;
}

inline hone::PackedBatch gpu_test_batch(const std::vector<int>& lengths, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> ud(0, vocab - 1);
  std::vector<std::vector<int32_t>> seqs;
  for (int n : lengths) {
    std::vector<int32_t> s(static_cast<size_t>(n));
    for (auto& x : s) x = ud(rng);
    seqs.push_back(s);
  }
  return hone::PackedBatch::pack(seqs);
}

// Loss weights per token: c_t = 1 + 0.1 (t mod 5), e_t = 0.3 - 0.05 (t mod 3).
inline std::vector<float> gpu_logprob_weights(int T) {
  std::vector<float> v(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) v[size_t(t)] = 1.f + 0.1f * float(t % 5);
  return v;
}
inline std::vector<float> gpu_entropy_weights(int T) {
  std::vector<float> v(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) v[size_t(t)] = 0.3f - 0.05f * float(t % 3);
  return v;
}

inline double rel_l2_of(const float* a, const float* ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  const double r = std::sqrt(num / (den > 0 ? den : 1e-30));
  return std::isnan(r) ? INFINITY : r;
}

inline double cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double(a[i]) * double(b[i]);
    aa += double(a[i]) * double(a[i]);
    bb += double(b[i]) * double(b[i]);
  }
  if (aa == 0 && bb == 0) return 1.0;
  const double c = ab / std::sqrt(aa * bb);
  return std::isnan(c) ? -1.0 : c;
}

inline std::vector<float> download_f32(const float* d, int64_t n) {
  std::vector<float> h(static_cast<size_t>(n));
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(h.data(), d, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// A GpuContext for one test case.
struct ScopedGpuContext {
  hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  ~ScopedGpuContext() { hone::cuda::destroy_gpu_context(ctx); }
};

}  // namespace test

#endif  // HONE_CUDA
