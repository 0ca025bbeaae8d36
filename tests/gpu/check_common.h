// Shared by hone's elementwise/normalization op checks: one GPU context for all of them (created on first use and
// kept to the end of the process), and a device-wide barrier. The ops run on the context's non-blocking stream,
// which does not wait for cudaMemcpy/cudaMemset on the legacy default stream: call inputs_ready() after uploading
// and poisoning, before launching the op under test.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/check.h"
#include "cuda/ops_cuda.h"

namespace test {

inline const hone::cuda::GpuContext& check_context() {
  static const hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  return ctx;
}

inline void inputs_ready() { CUDA_CHECK(cudaDeviceSynchronize()); }

inline std::vector<int32_t> random_ids(int64_t n, int lo, int hi, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(lo, hi - 1);
  std::vector<int32_t> v(size_t(n > 0 ? n : 0));
  for (auto& x : v) x = d(rng);
  return v;
}

inline double worst(double a, double b) { return (a > b || a != a) ? a : b; }

}  // namespace test
