// Sum of squares of a flat fp32 buffer in double (the global gradient norm). Two launches: a fixed grid of
// blocks each sums a grid-stride share (float4 loads when aligned) in double and writes one partial; one block adds
// the partials in a fixed order. The grid depends only on N and the SM count, so the result is reproducible.
// The host reads the double back through a pinned word after synchronizing the stream.
#include "cuda/check.h"
#include "cuda/elementwise_common.cuh"
#include "cuda/kernel_scratch.h"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 1024;  // partials; the final block of kThreads threads sums at most this many

__global__ void sum_squares_partial_kernel(double* partial, const float* x, int64_t N, bool vec) {
  __shared__ double shared[32];
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  double s = 0.0;
  const int64_t nvec = vec ? N / 4 : 0;
  for (int64_t i = start; i < nvec; i += stride) {
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    s += double(v.x) * v.x + double(v.y) * v.y + double(v.z) * v.z + double(v.w) * v.w;
  }
  for (int64_t i = nvec * 4 + start; i < N; i += stride) s += double(x[i]) * x[i];
  s = detail::block_sum(s, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void sum_partials_kernel(double* result, const double* partial, int n) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = detail::block_sum(s, shared);
  if (threadIdx.x == 0) *result = s;
}

}  // namespace

double sum_squares(const float* x, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return 0.0;
  const bool vec = detail::aligned16(x);
  const int64_t work = vec ? N / 4 + N % 4 : N;
  unsigned blocks = detail::grid_for(work, kThreads, ctx, 4);
  if (blocks > unsigned(kMaxBlocks)) blocks = kMaxBlocks;
  auto* scratch = static_cast<double*>(kernel_scratch(ctx, (size_t(blocks) + 1) * sizeof(double)));
  double* result = scratch + blocks;
  sum_squares_partial_kernel<<<blocks, kThreads, 0, ctx.stream>>>(scratch, x, N, vec);
  CUDA_CHECK_LAST();
  sum_partials_kernel<<<1, kThreads, 0, ctx.stream>>>(result, scratch, int(blocks));
  CUDA_CHECK_LAST();
  double* host = kernel_scratch_host_double(ctx);
  CUDA_CHECK(cudaMemcpyAsync(host, result, sizeof(double), cudaMemcpyDeviceToHost, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  return *host;
}

}  // namespace hone::cuda
