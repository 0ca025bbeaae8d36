// Micro-benchmark of the experts' grouped forward GEMMs at the decode shapes of Qwen3-30B-A3B (128 experts of width
// 768, hidden 2048, 8 experts a token): T = 64 .. 1024 tokens a step, a random routing (k distinct experts a token),
// random data. Times, with CUDA events after warm-up, the tiled kernel (moe_grouped_linear_forward_tiled: 64 x 64
// tiles, synchronous loads, each 64-row tile of an expert reading its weights) against what
// moe_grouped_linear_forward runs at these sizes (the few-rows kernel: each expert's weights streamed once) and each
// of the few-rows kernel's variants (column width, slice depth, stages), checks that they agree, and counts the
// bytes the step must move: the weights of every expert with a row, the rows in and the rows out. GB/s is those
// bytes over the time, against the device's copy bandwidth (1 GiB, read + write).
// Prints its numbers and exits 0; a CPU-only build prints that there is nothing to measure.
#include <cstdio>

#if HONE_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "cuda/moe_ops.h"
#include "gpu_bench_main.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

double time_us(const std::function<void()>& fn, cudaStream_t stream, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  CUDA_CHECK(cudaEventRecord(a, stream));
  for (int i = 0; i < iters; ++i) fn();
  CUDA_CHECK(cudaEventRecord(b, stream));
  CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  return 1000.0 * ms / iters;
}

void fill_random(bf16* d, size_t n, uint64_t seed) {
  std::vector<uint16_t> h(std::min<size_t>(n, size_t(1) << 24));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : h) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = uint32_t(s >> 40);
    x = uint16_t(0x3C00u + (r & 0x1FFu) + ((r & 0x200u) << 6));  // |x| in [2^-7, 2^-6), either sign
  }
  for (size_t at = 0; at < n; at += h.size()) {
    const size_t m = std::min(h.size(), n - at);
    CUDA_CHECK(cudaMemcpy(d + at, h.data(), m * sizeof(uint16_t), cudaMemcpyHostToDevice));
  }
}

float to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

double copy_gbps(cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  CUDA_CHECK(cudaMalloc(&a, bytes));
  CUDA_CHECK(cudaMalloc(&b, bytes));
  CUDA_CHECK(cudaMemset(a, 1, bytes));
  const double us = time_us([&] { CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream)); },
                            stream, 2, 10);
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  return 2.0 * double(bytes) / (us * 1e-6) / 1e9;
}

void bench(const hone::cuda::GpuContext& ctx, double copy) {
  const int E = 128, k = 8, C = 2048, Im = 768;
  std::printf("experts' forward GEMMs, %d experts, %d a token (us; GB/s of the weights, rows in and rows out; share "
              "of the copy bandwidth)\n", E, k);
  for (int T : {64, 128, 256, 512, 1024}) {
    const int N = T * k;
    std::mt19937 rng{static_cast<uint32_t>(T)};
    std::vector<int32_t> idx(static_cast<size_t>(N)), perm(static_cast<size_t>(E));
    for (int t = 0; t < T; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      for (int j = 0; j < k; ++j) {
        std::swap(perm[size_t(j)], perm[size_t(j) + rng() % size_t(E - j)]);
        idx[size_t(t) * k + size_t(j)] = perm[size_t(j)];
      }
    }
    std::vector<int32_t> offsets(static_cast<size_t>(E) + 1), row_of(static_cast<size_t>(N)),
        token_of(static_cast<size_t>(N));
    hone::cpu::moe_route(offsets.data(), row_of.data(), token_of.data(), idx.data(), T, k, E);
    int touched = 0, most = 0;
    for (int e = 0; e < E; ++e) {
      touched += offsets[size_t(e) + 1] > offsets[size_t(e)] ? 1 : 0;
      most = std::max(most, offsets[size_t(e) + 1] - offsets[size_t(e)]);
    }
    int32_t* d_off = nullptr;
    CUDA_CHECK(cudaMalloc(&d_off, offsets.size() * 4));
    CUDA_CHECK(cudaMemcpy(d_off, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
    for (int shape = 0; shape < 2; ++shape) {
      const int IC = shape == 0 ? C : Im, OC = shape == 0 ? Im : C;
      bf16 *x = nullptr, *w = nullptr, *o1 = nullptr, *o2 = nullptr;
      CUDA_CHECK(cudaMalloc(&x, size_t(N) * IC * 2));
      CUDA_CHECK(cudaMalloc(&w, size_t(E) * OC * IC * 2));
      CUDA_CHECK(cudaMalloc(&o1, size_t(N) * OC * 2));
      CUDA_CHECK(cudaMalloc(&o2, size_t(N) * OC * 2));
      fill_random(x, size_t(N) * IC, 1);
      fill_random(w, size_t(E) * OC * IC, 2);
      const double tiled = time_us([&] {
        hone::cuda::moe_grouped_linear_forward_tiled(o1, x, w, d_off, E, IC, OC, N, ctx);
      }, ctx.stream, 3, 20);
      std::vector<uint16_t> h1(static_cast<size_t>(N) * OC), h2(h1.size());
      CUDA_CHECK(cudaMemcpy(h1.data(), o1, h1.size() * 2, cudaMemcpyDeviceToHost));
      const double bytes = double(touched) * OC * IC * 2 + double(N) * (IC + OC) * 2;
      std::printf("  T %4d (%2d..%3d rows, %3d experts) %-8s tiled              %8.1f us %6.0f GB/s %5.1f%%\n", T,
                  N / E, most, touched, shape == 0 ? "gate/up" : "down", tiled, bytes / (tiled * 1e3),
                  100.0 * bytes / (tiled * 1e3) / copy);
      for (int v = -1; v < hone::cuda::moe_few_rows_variants(); ++v) {  // -1: what the forward runs
        CUDA_CHECK(cudaMemset(o2, 0xFF, size_t(N) * OC * 2));
        const double us = time_us([&] {
          if (v < 0) hone::cuda::moe_grouped_linear_forward(o2, x, w, d_off, E, IC, OC, N, ctx);
          else hone::cuda::moe_grouped_linear_forward_few_rows(v, o2, x, w, d_off, E, IC, OC, ctx);
        }, ctx.stream, 3, 20);
        CUDA_CHECK(cudaMemcpy(h2.data(), o2, h2.size() * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (size_t i = 0; i < h1.size(); ++i) {
          const double a = to_float(h1[i]), b = to_float(h2[i]);
          num += (a - b) * (a - b);
          den += a * a;
        }
        std::printf("    %-26s %8.1f us %6.0f GB/s %5.1f%%  x%.2f  rel_l2 %.1e\n",
                    v < 0 ? "forward (its choice)" : hone::cuda::moe_few_rows_variant_name(v), us, bytes / (us * 1e3),
                    100.0 * bytes / (us * 1e3) / copy, tiled / us, std::sqrt(num / std::max(den, 1e-30)));
      }
      CUDA_CHECK(cudaFree(x));
      CUDA_CHECK(cudaFree(w));
      CUDA_CHECK(cudaFree(o1));
      CUDA_CHECK(cudaFree(o2));
    }
    CUDA_CHECK(cudaFree(d_off));
  }
}

}  // namespace

int main() {
  return test::run_gpu_bench("bench_moe_decode", [](const hone::cuda::GpuContext& ctx) {
    const double copy = copy_gbps(ctx.stream);
    std::printf("device copy %.0f GB/s (read + write)\n", copy);
    bench(ctx, copy);
  });
}
#else
int main() {
  std::printf("bench_moe_decode: CPU-only build (CUDA=0), nothing to measure\n");
  return 0;
}
#endif
