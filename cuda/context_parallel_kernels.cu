// The device kernels of context parallelism (see context_parallel_kernels.h): grid-stride loops over n elements.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/context_parallel_kernels.h"

namespace hone::cuda {

namespace {

__global__ void scatter_rows_kernel(float* full, const float* all, const int32_t* rows, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride)
    if (rows[p] >= 0) full[rows[p]] = all[p];
}

__global__ void take_rows_kernel(float* local, const float* full, const int32_t* rows, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    local[i] = rows[i] >= 0 ? full[rows[i]] : 0.f;
}

__global__ void bf16_into_f32_kernel(float* dst, const bf16* src, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] += __bfloat162float(src[i]);
}

constexpr int kThreads = 256;

unsigned blocks(int64_t n, const GpuContext& ctx) {
  return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(std::max(ctx.sm_count, 1)) * 16));
}

}  // namespace

void scatter_rows_f32(float* full, const float* all, const int32_t* rows, int64_t n, const GpuContext& ctx) {
  if (n <= 0) return;
  scatter_rows_kernel<<<blocks(n, ctx), kThreads, 0, ctx.stream>>>(full, all, rows, n);
  CUDA_CHECK_LAST();
}

void take_rows_f32(float* local, const float* full, const int32_t* rows, int64_t n, const GpuContext& ctx) {
  if (n <= 0) return;
  take_rows_kernel<<<blocks(n, ctx), kThreads, 0, ctx.stream>>>(local, full, rows, n);
  CUDA_CHECK_LAST();
}

void accumulate_bf16_into_f32(float* dst, const bf16* src, int64_t n, const GpuContext& ctx) {
  if (n <= 0) return;
  bf16_into_f32_kernel<<<blocks(n, ctx), kThreads, 0, ctx.stream>>>(dst, src, n);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
