// SwiGLU on bf16: out = silu(gate) * up with silu(g) = g / (1 + exp(-g)), in fp32 as the CPU twin computes it.
// Backward writes dgate and dup, or accumulates them (bf16, += in fp32, rounded once; the old values are read only
// then). One grid-stride pass, 16-byte accesses
// when every pointer is 16-byte aligned, a scalar tail for N % 8.
#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/elementwise_common.cuh"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

using detail::kVec;

constexpr int kThreads = 256;

__device__ __forceinline__ float silu_of(float g) { return g / (1.0f + expf(-g)); }

__device__ __forceinline__ void swiglu_grad(float& dg, float& du, float d, float g, float u) {
  const float sig = 1.0f / (1.0f + expf(-g));
  dg += d * u * sig * (1.0f + g * (1.0f - sig));
  du += d * (g * sig);
}

__global__ void swiglu_forward_kernel(bf16* out, const bf16* gate, const bf16* up, int64_t N, bool vec) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = vec ? N / kVec : 0;
  for (int64_t i = start; i < nvec; i += stride) {
    float g[kVec], u[kVec];
    detail::load8(g, gate + i * kVec);
    detail::load8(u, up + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) g[k] = silu_of(g[k]) * u[k];
    detail::store8(out + i * kVec, g);
  }
  for (int64_t i = nvec * kVec + start; i < N; i += stride)
    out[i] = __float2bfloat16_rn(silu_of(__bfloat162float(gate[i])) * __bfloat162float(up[i]));
}

__global__ void swiglu_backward_kernel(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up,
                                       int64_t N, bool vec, bool accumulate) {
  const int64_t start = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t nvec = vec ? N / kVec : 0;
  for (int64_t i = start; i < nvec; i += stride) {
    float d[kVec], g[kVec], u[kVec], dg[kVec] = {}, du[kVec] = {};
    detail::load8(d, dout + i * kVec);
    detail::load8(g, gate + i * kVec);
    detail::load8(u, up + i * kVec);
    if (accumulate) {
      detail::load8(dg, dgate + i * kVec);
      detail::load8(du, dup + i * kVec);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) swiglu_grad(dg[k], du[k], d[k], g[k], u[k]);
    detail::store8(dgate + i * kVec, dg);
    detail::store8(dup + i * kVec, du);
  }
  for (int64_t i = nvec * kVec + start; i < N; i += stride) {
    float dg = accumulate ? __bfloat162float(dgate[i]) : 0.f, du = accumulate ? __bfloat162float(dup[i]) : 0.f;
    swiglu_grad(dg, du, __bfloat162float(dout[i]), __bfloat162float(gate[i]), __bfloat162float(up[i]));
    dgate[i] = __float2bfloat16_rn(dg);
    dup[i] = __float2bfloat16_rn(du);
  }
}

int64_t work_items(int64_t N, bool vec) { return vec ? N / kVec + N % kVec : N; }

}  // namespace

void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(out) && detail::aligned16(gate) && detail::aligned16(up);
  launch_dependent(swiglu_forward_kernel, dim3(detail::grid_for(work_items(N, vec), kThreads, ctx)), dim3(kThreads), 0,
                   ctx.stream, out, gate, up, N, vec);
  CUDA_CHECK_LAST();
}

void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int64_t N,
                     bool accumulate, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(dgate) && detail::aligned16(dup) && detail::aligned16(dout) &&
                   detail::aligned16(gate) && detail::aligned16(up);
  swiglu_backward_kernel<<<detail::grid_for(work_items(N, vec), kThreads, ctx), kThreads, 0, ctx.stream>>>(
      dgate, dup, dout, gate, up, N, vec, accumulate);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
