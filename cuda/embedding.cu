// Token embedding on the GPU: forward gathers rows of wte (bf16) into out; backward scatter-adds dout rows into the
// fp32 dwte with atomicAdd (rows with the same token add in an unspecified order: fp32 rounding differs from the
// serial CPU sum by a few ulp, and runs are not bitwise reproducible). One block per token row; 16-byte accesses
// when C % 8 == 0 and the pointers are 16-byte aligned. The device cannot throw, so a negative id (an error the
// CPU twin reports) yields a zero row forward and no gradient backward.
// The vocabulary-parallel slice ops use the same kernels: wte holds the rows [vocab_begin, vocab_begin + V) and an
// id outside them is treated as a negative id is (zero row, no gradient); the whole ops pass the slice [0, INT_MAX).
#include <climits>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/elementwise_common.cuh"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

using detail::kVec;

constexpr int kThreads = 128;

// The row of wte that holds id, or -1 when the slice does not (negative ids included: vocab_begin >= 0).
__device__ __forceinline__ int64_t slice_row(int32_t id, int vocab_begin, int V) {
  const int64_t row = int64_t(id) - vocab_begin;
  return row >= 0 && row < V ? row : -1;
}

__global__ void embedding_forward_kernel(bf16* out, const int32_t* ids, const bf16* wte, int C, bool vec,
                                         int vocab_begin, int V) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int t = blockIdx.x;
  const int64_t row = slice_row(ids[t], vocab_begin, V);
  bf16* o = out + int64_t(t) * C;
  const bf16* w = wte + (row < 0 ? 0 : row) * C;
  if (vec) {
    for (int c = threadIdx.x * kVec; c < C; c += blockDim.x * kVec) {
      detail::Bf16x8 v{};
      if (row >= 0) v = *reinterpret_cast<const detail::Bf16x8*>(w + c);
      *reinterpret_cast<detail::Bf16x8*>(o + c) = v;
    }
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) o[c] = row >= 0 ? w[c] : __float2bfloat16_rn(0.f);
  }
}

__global__ void embedding_backward_kernel(float* dwte, const bf16* dout, const int32_t* ids, int C, bool vec,
                                          int vocab_begin, int V) {
  const int t = blockIdx.x;
  const int64_t row = slice_row(ids[t], vocab_begin, V);
  if (row < 0) return;
  float* d = dwte + row * C;
  const bf16* g = dout + int64_t(t) * C;
  if (vec) {
    for (int c = threadIdx.x * kVec; c < C; c += blockDim.x * kVec) {
      float f[kVec];
      detail::load8(f, g + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) atomicAdd(d + c + k, f[k]);
    }
  } else {
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(d + c, __bfloat162float(g[c]));
  }
}

}  // namespace

void embedding_slice_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, int C, int vocab_begin, int V,
                             const GpuContext& ctx) {
  HONE_CHECK(vocab_begin >= 0 && V >= 0, "bad embedding slice [", vocab_begin, ", +", V, ")");
  if (T <= 0 || C <= 0) return;
  const bool vec = C % kVec == 0 && detail::aligned16(out) && detail::aligned16(wte);
  launch_dependent(embedding_forward_kernel, dim3(T), dim3(kThreads), 0, ctx.stream, out, ids, wte, C, vec, vocab_begin,
                   V);
  CUDA_CHECK_LAST();
}

void embedding_slice_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, int C, int vocab_begin, int V,
                              const GpuContext& ctx) {
  HONE_CHECK(vocab_begin >= 0 && V >= 0, "bad embedding slice [", vocab_begin, ", +", V, ")");
  if (T <= 0 || C <= 0) return;
  const bool vec = C % kVec == 0 && detail::aligned16(dout);
  embedding_backward_kernel<<<T, kThreads, 0, ctx.stream>>>(dwte, dout, ids, C, vec, vocab_begin, V);
  CUDA_CHECK_LAST();
}

void embedding_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, int C, const GpuContext& ctx) {
  embedding_slice_forward(out, ids, wte, T, C, 0, INT_MAX, ctx);
}

void embedding_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, int C, const GpuContext& ctx) {
  embedding_slice_backward(dwte, dout, ids, T, C, 0, INT_MAX, ctx);
}

}  // namespace hone::cuda
