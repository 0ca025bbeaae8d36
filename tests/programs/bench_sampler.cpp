// Micro-benchmark of the fused sampler (cuda::sample_tokens) at a decode step's shape: B = 512 rows of the Qwen3
// (V = 151,936) and Llama 3 (V = 128,256) vocabularies, fp32 logits drawn from normal distributions of standard
// deviation 2 to 4 (one per row). Each setting is timed with CUDA events over 20 calls after 3 of warm-up, the step
// changing every call (new uniforms); GB/s counts one read of the logits (B * V * 4 bytes), so a path that reads the
// row n times shows about 1/n of the bandwidth. Settings: greedy, no filter, top-k 50, top-p 0.9, top-k 50 + top-p
// 0.9, and the three together with min-p 0.05. Prints its numbers and exits 0; without a CUDA device (or in a
// CPU-only build) it prints that it skipped.
#include <cstdio>

#if HONE_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda/check.h"
#include "gpu_bench_main.h"
#include "cuda/generation_ops.h"

namespace {

struct Setting {
  const char* name;
  hone::cuda::GpuSamplingParams p;
};

std::vector<Setting> settings() {
  std::vector<Setting> s(6);
  s[0].name = "greedy";
  s[0].p.greedy = true;
  s[1].name = "no filter";
  s[2].name = "top-k 50";
  s[2].p.top_k = 50;
  s[3].name = "top-p 0.9";
  s[3].p.top_p = 0.9f;
  s[4].name = "top-k 50 + top-p 0.9";
  s[4].p.top_k = 50;
  s[4].p.top_p = 0.9f;
  s[5].name = "top-k 50 + top-p 0.9 + min-p 0.05";
  s[5].p.top_k = 50;
  s[5].p.top_p = 0.9f;
  s[5].p.min_p = 0.05f;
  return s;
}

// Normal logits (Box-Muller over a 64-bit LCG: fast enough for 78 M values), row b of standard deviation
// 2 + 2 * (b % 8) / 7.
std::vector<float> random_logits(int B, int V) {
  std::vector<float> x(size_t(B) * size_t(V));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  auto uniform = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return (double(s >> 11) + 0.5) * (1.0 / 9007199254740992.0);  // (0, 1)
  };
  for (int b = 0; b < B; ++b) {
    const double sd = 2.0 + 2.0 * double(b % 8) / 7.0;
    float* r = x.data() + size_t(b) * size_t(V);
    for (int i = 0; i < V; i += 2) {
      const double rad = std::sqrt(-2.0 * std::log(uniform())), ang = 6.283185307179586 * uniform();
      r[i] = float(sd * rad * std::cos(ang));
      if (i + 1 < V) r[i + 1] = float(sd * rad * std::sin(ang));
    }
  }
  return x;
}

void bench(const hone::cuda::GpuContext& ctx, const char* vocab, int B, int V) {
  const std::vector<float> logits = random_logits(B, V);
  std::vector<int32_t> idx(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) idx[size_t(b)] = b;
  float *d_logits = nullptr, *d_lp = nullptr;
  int32_t *d_sample = nullptr, *d_pos = nullptr, *d_tokens = nullptr;
  CUDA_CHECK(cudaMalloc(&d_logits, logits.size() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_lp, size_t(B) * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_sample, size_t(B) * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&d_pos, size_t(B) * sizeof(int32_t)));
  CUDA_CHECK(cudaMalloc(&d_tokens, size_t(B) * sizeof(int32_t)));
  CUDA_CHECK(cudaMemcpy(d_logits, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_sample, idx.data(), idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_pos, idx.data(), idx.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  const double bytes = double(B) * V * sizeof(float);
  std::printf("sample_tokens, %s: B=%d V=%d (one read of the logits: %.1f MB)\n", vocab, B, V, bytes / 1e6);
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  for (const Setting& st : settings()) {
    uint32_t step = 0;
    auto call = [&] {
      hone::cuda::sample_tokens(d_tokens, d_lp, d_logits, V, B, V, st.p, 1234, step++, d_sample, d_pos, ctx);
    };
    for (int i = 0; i < 3; ++i) call();
    const int iters = 20;
    CUDA_CHECK(cudaEventRecord(a, ctx.stream));
    for (int i = 0; i < iters; ++i) call();
    CUDA_CHECK(cudaEventRecord(b, ctx.stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    const double us = 1000.0 * ms / iters;
    std::printf("  %-36s %10.1f us  %8.0f GB/s (per one read of the logits)\n", st.name, us, bytes / (us * 1e3));
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  for (void* p : {static_cast<void*>(d_logits), static_cast<void*>(d_lp), static_cast<void*>(d_sample),
                  static_cast<void*>(d_pos), static_cast<void*>(d_tokens)})
    CUDA_CHECK(cudaFree(p));
}

}  // namespace

int main() {
  return test::run_gpu_bench("bench_sampler", [](const hone::cuda::GpuContext& ctx) {
    bench(ctx, "Qwen3", 512, 151936);
    bench(ctx, "Llama 3", 512, 128256);
  });
}

#else
int main() {
  std::printf("bench_sampler: CPU-only build (CUDA=0), skipped\n");
  return 0;
}
#endif
