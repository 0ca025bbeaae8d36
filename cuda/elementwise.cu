// Elementwise kernels over flat buffers: residual add (bf16), in-place scaling (fp32), and the bf16 <-> fp32
// casts, of which fp32 -> bf16 is the refit of generation weights from the fp32 master weights.
// Each is one grid-stride pass with 16-byte loads and stores when every pointer is 16-byte aligned (8 bf16 or
// 4 fp32 per access; the last N % 8 values take the scalar path), and a scalar pass otherwise.
#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/elementwise_common.cuh"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

using detail::kVec;

constexpr int kThreads = 256;

// Elements [vec_end, N) (the tail) or [0, N) (no vector path), one per thread, grid-stride.
__device__ __forceinline__ int64_t tid64() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t stride64() { return int64_t(gridDim.x) * blockDim.x; }

// out may alias a or b: every thread reads its own elements before it writes them.
__global__ void add_kernel(bf16* out, const bf16* a, const bf16* b, int64_t N, bool vec) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int64_t nvec = vec ? N / kVec : 0;
  for (int64_t i = tid64(); i < nvec; i += stride64()) {
    float x[kVec], y[kVec];
    detail::load8(x, a + i * kVec);
    detail::load8(y, b + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) x[k] += y[k];
    detail::store8(out + i * kVec, x);
  }
  for (int64_t i = nvec * kVec + tid64(); i < N; i += stride64())
    out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void scale_kernel(float* x, float s, int64_t N, bool vec) {
  const int64_t nvec = vec ? N / 4 : 0;
  for (int64_t i = tid64(); i < nvec; i += stride64()) {
    float4 v = reinterpret_cast<float4*>(x)[i];
    v.x *= s;
    v.y *= s;
    v.z *= s;
    v.w *= s;
    reinterpret_cast<float4*>(x)[i] = v;
  }
  for (int64_t i = nvec * 4 + tid64(); i < N; i += stride64()) x[i] *= s;
}

// fp32 -> bf16, round to nearest even: 32 bytes read and 16 bytes written per vector step.
__global__ void f32_to_bf16_kernel(bf16* out, const float* in, int64_t N, bool vec) {
  const int64_t nvec = vec ? N / kVec : 0;
  for (int64_t i = tid64(); i < nvec; i += stride64()) {
    const float4 lo = reinterpret_cast<const float4*>(in)[2 * i];
    const float4 hi = reinterpret_cast<const float4*>(in)[2 * i + 1];
    const float f[kVec] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    detail::store8(out + i * kVec, f);
  }
  for (int64_t i = nvec * kVec + tid64(); i < N; i += stride64()) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void bf16_to_f32_kernel(float* out, const bf16* in, int64_t N, bool vec) {
  const int64_t nvec = vec ? N / kVec : 0;
  for (int64_t i = tid64(); i < nvec; i += stride64()) {
    float f[kVec];
    detail::load8(f, in + i * kVec);
    reinterpret_cast<float4*>(out)[2 * i] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(out)[2 * i + 1] = make_float4(f[4], f[5], f[6], f[7]);
  }
  for (int64_t i = nvec * kVec + tid64(); i < N; i += stride64()) out[i] = __bfloat162float(in[i]);
}

// Work items of a launch: vector steps plus the tail, or every element on the scalar path.
int64_t work_items(int64_t N, int per_vec, bool vec) { return vec ? N / per_vec + N % per_vec : N; }

}  // namespace

void add_forward(bf16* out, const bf16* a, const bf16* b, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(out) && detail::aligned16(a) && detail::aligned16(b);
  const unsigned grid = detail::grid_for(work_items(N, kVec, vec), kThreads, ctx);
  launch_dependent(add_kernel, dim3(grid), dim3(kThreads), 0, ctx.stream, out, a, b, N, vec);
  CUDA_CHECK_LAST();
}

void scale_inplace(float* x, float s, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(x);
  const unsigned grid = detail::grid_for(work_items(N, 4, vec), kThreads, ctx);
  scale_kernel<<<grid, kThreads, 0, ctx.stream>>>(x, s, N, vec);
  CUDA_CHECK_LAST();
}

void f32_to_bf16(bf16* out, const float* in, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(out) && detail::aligned16(in);
  const unsigned grid = detail::grid_for(work_items(N, kVec, vec), kThreads, ctx);
  f32_to_bf16_kernel<<<grid, kThreads, 0, ctx.stream>>>(out, in, N, vec);
  CUDA_CHECK_LAST();
}

void refit_cast(bf16* out, const float* master, int64_t N, const GpuContext& ctx) {
  f32_to_bf16(out, master, N, ctx);
}

void bf16_to_f32(float* out, const bf16* in, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  const bool vec = detail::aligned16(out) && detail::aligned16(in);
  const unsigned grid = detail::grid_for(work_items(N, kVec, vec), kThreads, ctx);
  bf16_to_f32_kernel<<<grid, kThreads, 0, ctx.stream>>>(out, in, N, vec);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
