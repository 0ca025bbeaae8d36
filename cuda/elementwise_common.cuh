// Device helpers shared by hone's elementwise, normalization and reduction kernels: 16-byte packs of bf16 and fp32,
// alignment tests for the vector paths, warp and block sums, and a grid size for grid-stride loops.
// Included by .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda::detail {

constexpr int kVec = 8;  // bf16 values in one 16-byte load or store

// Eight bf16 values, moved as one 16-byte transaction.
struct alignas(16) Bf16x8 {
  __nv_bfloat162 h[4];
};

// Eight bf16 values already in registers (loaded as a Bf16x8 earlier), to fp32.
__device__ __forceinline__ void unpack8(float (&f)[kVec], const Bf16x8& v) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 t = __bfloat1622float2(v.h[k]);
    f[2 * k] = t.x;
    f[2 * k + 1] = t.y;
  }
}

__device__ __forceinline__ void load8(float (&f)[kVec], const bf16* p) {
  unpack8(f, *reinterpret_cast<const Bf16x8*>(p));
}

__device__ __forceinline__ void store8(bf16* p, const float (&f)[kVec]) {
  Bf16x8 v;
#pragma unroll
  for (int k = 0; k < 4; ++k) v.h[k] = __floats2bfloat162_rn(f[2 * k], f[2 * k + 1]);
  *reinterpret_cast<Bf16x8*>(p) = v;
}

__host__ __device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over a block of up to 1024 threads (blockDim.x a multiple of 32, blockDim.y == 1); every thread gets the
// total. `shared` holds 32 values. Call from all threads of the block.
template <typename T>
__device__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  return warp_sum(total);
}

// Blocks for a grid-stride loop over `work` items of `threads` each: enough to fill every SM several times over,
// never more than the work needs, at least one.
inline unsigned grid_for(int64_t work, int threads, const GpuContext& ctx, int blocks_per_sm = 8) {
  const int64_t need = (work + threads - 1) / threads;
  const int64_t cap = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * blocks_per_sm;
  const int64_t g = need < cap ? need : cap;
  return unsigned(g > 0 ? g : 1);
}

}  // namespace hone::cuda::detail
