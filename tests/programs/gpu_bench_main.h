// The main() of the GPU micro-benchmarks (bench_decode_attention, bench_sampler): without a device they print that
// they skipped and succeed, so a CPU machine can run every program; with one, a context on device 0, the device's
// name, the benchmark, and one line for an error (exit 1).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <exception>

#include "cuda/check.h"
#include "cuda/ops_cuda.h"

namespace test {

template <typename Body>
int run_gpu_bench(const char* name, Body&& body) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("%s: no CUDA device, skipped\n", name);
    return 0;
  }
  try {
    hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    body(ctx);
    hone::cuda::destroy_gpu_context(ctx);
  } catch (const std::exception& e) {
    std::printf("%s failed: %s\n", name, e.what());
    return 1;
  }
  return 0;
}

}  // namespace test
