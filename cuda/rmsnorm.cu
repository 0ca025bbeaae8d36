// RMSNorm on bf16 rows (also the per-head q/k norm: rows = T*H, C = D), fp32 math, Hugging Face's order:
// rstd = 1/sqrt(mean(x^2) + eps), out = w * (x * rstd), rounded once to bf16.
//   forward / fused add+forward: one warp per row (8 rows per block), two passes over the row (the second hits L1/L2);
//   with fewer rows than fill the SMs that way (a decode step), a block per row holding the row in registers.
//   backward dx: one warp per row, dx (+)= rstd (dout w - x rstd^2 sum(dout w x)/C) in fp32, rounded once (the old
//   dx is read only when accumulating).
//   backward dw: deterministic two-level sum: blocks of 32 columns x a slice of rows write partial sums (fixed
//   slices, fixed order), a second kernel adds the slices in order into dw (fp32, accumulated).
//   backward of rows up to 2,048 wide (16-byte accesses): dx and dw in one pass, each row read once into registers
//   (rmsnorm_backward_fused_kernel); the separate dw pass read dout and x again, a 2-byte load a thread at a time.
// 16-byte accesses when C % 8 == 0 and the row pointers are 16-byte aligned; scalar otherwise.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/elementwise_common.cuh"
#include "cuda/kernel_scratch.h"
#include "cuda/ops_cuda.h"

namespace hone::cuda {

namespace {

using detail::kVec;

constexpr int kWarpsPerBlock = 8;
constexpr int kDwRowsPerBlock = 8;  // blockDim.y of the dw partial kernel (blockDim.x = 32 columns)

// The block-per-row forward: threads a block, 16-byte chunks a thread (rows up to 8 * 256 * 8 = 16,384 wide).
constexpr int kRowThreads = 256;
constexpr int kRowChunks = 8;

__device__ __forceinline__ int warp_row() { return blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); }

// Normalizes row `row` of `src` (already final bf16 values) into out, given the row's sum of squares.
__device__ __forceinline__ void normalize_row(bf16* o, float* rstd, const bf16* src, const bf16* w, int row, int C,
                                              float ss, float eps, bool vec) {
  const int lane = threadIdx.x & 31;
  const float rs = 1.0f / sqrtf(ss / float(C) + eps);
  if (lane == 0) rstd[row] = rs;
  if (vec) {
#pragma unroll 4  // several 16-byte loads in flight per lane
    for (int c = lane * kVec; c < C; c += 32 * kVec) {
      float xv[kVec], wv[kVec];
      detail::load8(xv, src + c);
      detail::load8(wv, w + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) xv[k] = wv[k] * (xv[k] * rs);
      detail::store8(o + c, xv);
    }
  } else {
    for (int c = lane; c < C; c += 32)
      o[c] = __float2bfloat16_rn(__bfloat162float(w[c]) * (__bfloat162float(src[c]) * rs));
  }
}

__global__ void rmsnorm_forward_kernel(bf16* out, float* rstd, const bf16* x, const bf16* w, int rows, int C,
                                       float eps, bool vec) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int row = warp_row();
  if (row >= rows) return;  // whole warps leave; no block-level synchronization follows
  const int lane = threadIdx.x & 31;
  const bf16* xr = x + int64_t(row) * C;
  float ss = 0.f;
  if (vec) {
#pragma unroll 4  // several 16-byte loads in flight per lane
    for (int c = lane * kVec; c < C; c += 32 * kVec) {
      float xv[kVec];
      detail::load8(xv, xr + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += xv[k] * xv[k];
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      const float v = __bfloat162float(xr[c]);
      ss += v * v;
    }
  }
  ss = detail::warp_sum(ss);
  normalize_row(out + int64_t(row) * C, rstd, xr, w, row, C, ss, eps, vec);
}

// sum = a + b (rounded to bf16), then the norm of the rounded sum. sum may alias a or b: each lane reads its own
// elements before writing them, and the second pass reads back only what the same lane wrote.
__global__ void add_rmsnorm_forward_kernel(bf16* sum, bf16* out, float* rstd, const bf16* a, const bf16* b,
                                           const bf16* w, int rows, int C, float eps, bool vec) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t off = int64_t(row) * C;
  float ss = 0.f;
  if (vec) {
#pragma unroll 4  // several 16-byte loads in flight per lane
    for (int c = lane * kVec; c < C; c += 32 * kVec) {
      float av[kVec], bv[kVec];
      detail::load8(av, a + off + c);
      detail::load8(bv, b + off + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        av[k] = __bfloat162float(__float2bfloat16_rn(av[k] + bv[k]));
        ss += av[k] * av[k];
      }
      detail::store8(sum + off + c, av);
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      const bf16 s = __float2bfloat16_rn(__bfloat162float(a[off + c]) + __bfloat162float(b[off + c]));
      sum[off + c] = s;
      const float v = __bfloat162float(s);
      ss += v * v;
    }
  }
  ss = detail::warp_sum(ss);
  normalize_row(out + off, rstd, sum + off, w, row, C, ss, eps, vec);
}

// Few rows (a decode step's batch): a block per row, every 16-byte chunk loaded once into registers, the sum of
// squares over the block, the normalized row written from the registers. One warp per row would leave most SMs idle
// and walk the row twice with a whole load latency per pass. With add, `sum` may alias a or b: each thread writes
// only the chunks it read.
template <bool kAdd>
__global__ void __launch_bounds__(kRowThreads) rmsnorm_row_block_kernel(bf16* sum, bf16* out, float* rstd,
                                                                       const bf16* a, const bf16* b, const bf16* w,
                                                                       int C, float eps) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  __shared__ float shared[32];
  const int row = blockIdx.x;
  const int64_t off = int64_t(row) * C;
  float v[kRowChunks][kVec];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int c = (i * kRowThreads + int(threadIdx.x)) * kVec;
    if (c >= C) break;
    detail::load8(v[i], a + off + c);
    if constexpr (kAdd) {
      float bv[kVec];
      detail::load8(bv, b + off + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[i][k] = __bfloat162float(__float2bfloat16_rn(v[i][k] + bv[k]));
      detail::store8(sum + off + c, v[i]);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) ss += v[i][k] * v[i][k];
  }
  ss = detail::block_sum(ss, shared);
  const float rs = 1.0f / sqrtf(ss / float(C) + eps);
  if (threadIdx.x == 0) rstd[row] = rs;
#pragma unroll
  for (int i = 0; i < kRowChunks; ++i) {
    const int c = (i * kRowThreads + int(threadIdx.x)) * kVec;
    if (c >= C) break;
    float wv[kVec];
    detail::load8(wv, w + c);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[i][k] = wv[k] * (v[i][k] * rs);
    detail::store8(out + off + c, v[i]);
  }
}

// Eight columns of dx (+)= rs (g w - x k), with k = rs^2 sum(g w x) / C of the row; the old dx read only when
// accumulating.
__device__ __forceinline__ void write_dx8(bf16* dx, const float (&gv)[kVec], const float (&wv)[kVec],
                                          const float (&xv)[kVec], float rs, float k, bool accumulate) {
  float dv[kVec];
  if (accumulate) {
    detail::load8(dv, dx);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dv[j] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) dv[j] += rs * (gv[j] * wv[j] - xv[j] * k);
  detail::store8(dx, dv);
}

__global__ void rmsnorm_backward_dx_kernel(bf16* dx, const bf16* dout, const bf16* x, const bf16* w,
                                           const float* rstd, int rows, int C, bool vec, bool accumulate) {
  const int row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t off = int64_t(row) * C;
  const float rs = rstd[row];
  float dot = 0.f;
  if (vec) {
#pragma unroll 4  // several 16-byte loads in flight per lane
    for (int c = lane * kVec; c < C; c += 32 * kVec) {
      float gv[kVec], wv[kVec], xv[kVec];
      detail::load8(gv, dout + off + c);
      detail::load8(wv, w + c);
      detail::load8(xv, x + off + c);
#pragma unroll
      for (int k = 0; k < kVec; ++k) dot += gv[k] * wv[k] * xv[k];
    }
  } else {
    for (int c = lane; c < C; c += 32)
      dot += __bfloat162float(dout[off + c]) * __bfloat162float(w[c]) * __bfloat162float(x[off + c]);
  }
  dot = detail::warp_sum(dot);
  const float k = dot / float(C) * rs * rs;
  if (vec) {
#pragma unroll 4  // several 16-byte loads in flight per lane
    for (int c = lane * kVec; c < C; c += 32 * kVec) {
      float gv[kVec], wv[kVec], xv[kVec];
      detail::load8(gv, dout + off + c);
      detail::load8(wv, w + c);
      detail::load8(xv, x + off + c);
      write_dx8(dx + off + c, gv, wv, xv, rs, k, accumulate);
    }
  } else {
    for (int c = lane; c < C; c += 32) {
      const float g = __bfloat162float(dout[off + c]), wc = __bfloat162float(w[c]), xc = __bfloat162float(x[off + c]);
      const float old = accumulate ? __bfloat162float(dx[off + c]) : 0.f;
      dx[off + c] = __float2bfloat16_rn(old + rs * (g * wc - xc * k));
    }
  }
}

// Rows up to kMaxFusedChunks * 256 wide (16-byte accesses): dx and dw in one pass over dout and x. A warp takes rows
// blockIdx.x * 8 + warp, stepping gridDim.x * 8 (a fixed grid), and holds each row in registers as it came from
// memory: the row's dot product, then dx from the same registers, and the lane's own columns of dw (chunks
// c = (i * 32 + lane) * 8) summed over the warp's rows in registers. The block adds its warps in a fixed order in
// shared memory and writes one partial row; rmsnorm_backward_dw_final_kernel adds the partial rows in order. dx
// comes out exactly as rmsnorm_backward_dx_kernel's (the same per-lane order); dw is deterministic.
constexpr int kMaxFusedChunks = 8;

// One chunk of a held row in fp32: dout and x from the packed registers they were loaded into (a row is held packed,
// half the registers), w from memory (an L1 hit after the block's first row).
__device__ __forceinline__ void unpack_chunk(float (&gv)[kVec], float (&xv)[kVec], float (&wv)[kVec],
                                             const detail::Bf16x8& g, const detail::Bf16x8& x, const bf16* w) {
  detail::unpack8(gv, g);
  detail::unpack8(xv, x);
  detail::load8(wv, w);
}

template <int NCH>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) rmsnorm_backward_fused_kernel(bf16* dx, float* partial,
                                                                                     const bf16* dout, const bf16* x,
                                                                                     const bf16* w, const float* rstd,
                                                                                     int rows, int C, bool accumulate) {
  extern __shared__ float block_dw[];  // [C]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[NCH][kVec];
#pragma unroll
  for (int i = 0; i < NCH; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[i][j] = 0.f;
  for (int row = blockIdx.x * kWarpsPerBlock + warp; row < rows; row += gridDim.x * kWarpsPerBlock) {
    const int64_t off = int64_t(row) * C;
    detail::Bf16x8 graw[NCH], xraw[NCH];
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int c = (i * 32 + lane) * kVec;
      if (c < C) {
        graw[i] = *reinterpret_cast<const detail::Bf16x8*>(dout + off + c);
        xraw[i] = *reinterpret_cast<const detail::Bf16x8*>(x + off + c);
      }
    }
    const float rs = rstd[row];
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int c = (i * 32 + lane) * kVec;
      if (c < C) {
        float gv[kVec], wv[kVec], xv[kVec];
        unpack_chunk(gv, xv, wv, graw[i], xraw[i], w + c);
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += gv[k] * wv[k] * xv[k];
      }
    }
    dot = detail::warp_sum(dot);
    const float k = dot / float(C) * rs * rs;
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int c = (i * 32 + lane) * kVec;
      if (c < C) {
        float gv[kVec], wv[kVec], xv[kVec];
        unpack_chunk(gv, xv, wv, graw[i], xraw[i], w + c);
        write_dx8(dx + off + c, gv, wv, xv, rs, k, accumulate);
#pragma unroll
        for (int j = 0; j < kVec; ++j) acc[i][j] += gv[j] * xv[j] * rs;
      }
    }
  }
  for (int wi = 0; wi < kWarpsPerBlock; ++wi) {  // warp 0 first, then each warp adds its columns in turn
    if (warp == wi) {
#pragma unroll
      for (int i = 0; i < NCH; ++i) {
        const int c = (i * 32 + lane) * kVec;
        if (c < C)
#pragma unroll
          for (int j = 0; j < kVec; ++j) block_dw[c + j] = (wi == 0 ? 0.f : block_dw[c + j]) + acc[i][j];
      }
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < C; c += blockDim.x) partial[int64_t(blockIdx.x) * C + c] = block_dw[c];
}

// Partial dw over the rows of slice blockIdx.y (rows blockIdx.y*8 + ty, stepping gridDim.y*8), columns
// blockIdx.x*32 + tx. With one slice (partial == nullptr) the block adds straight into dw.
__global__ void rmsnorm_backward_dw_partial_kernel(float* partial, float* dw, const bf16* dout, const bf16* x,
                                                   const float* rstd, int rows, int C) {
  __shared__ float acc[kDwRowsPerBlock][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float s = 0.f;
  if (c < C) {
    for (int r = blockIdx.y * kDwRowsPerBlock + threadIdx.y; r < rows; r += gridDim.y * kDwRowsPerBlock) {
      const int64_t i = int64_t(r) * C + c;
      s += __bfloat162float(dout[i]) * __bfloat162float(x[i]) * rstd[r];
    }
  }
  acc[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float t = 0.f;
#pragma unroll
    for (int y = 0; y < kDwRowsPerBlock; ++y) t += acc[y][threadIdx.x];
    if (partial)
      partial[int64_t(blockIdx.y) * C + c] = t;
    else
      dw[c] += t;
  }
}

__global__ void rmsnorm_backward_dw_final_kernel(float* dw, const float* partial, int slices, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float t = 0.f;
  for (int s = 0; s < slices; ++s) t += partial[int64_t(s) * C + c];
  dw[c] += t;
}

unsigned row_blocks(int rows) { return unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock); }

// A block per row where a warp per row would not give every SM a block of 8 rows, for rows the block can hold.
bool use_row_blocks(int rows, int C, bool vec, const GpuContext& ctx) {
  const int sms = ctx.sm_count > 0 ? ctx.sm_count : 132;
  return vec && C <= kRowThreads * kRowChunks * kVec && int64_t(row_blocks(rows)) < sms;
}

// The fused backward's fixed grid: as many blocks as fit on the SMs at once (at most one per 8 rows), so the grid,
// and with it the summation order of dw, depends only on the shape and the GPU.
template <int NCH>
void launch_fused_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                           int rows, int C, bool accumulate, const GpuContext& ctx) {
  const size_t smem = size_t(C) * sizeof(float);
  static const int per_sm = [] {  // by the largest shared block_dw, so it holds for every C of this NCH
    int n = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, rmsnorm_backward_fused_kernel<NCH>,
                                                             kWarpsPerBlock * 32, NCH * 32 * kVec * sizeof(float)));
    return n > 0 ? n : 1;
  }();
  const int sms = ctx.sm_count > 0 ? ctx.sm_count : 132;
  const int blocks = int(std::min<int64_t>(row_blocks(rows), int64_t(sms) * per_sm));
  float* partial = static_cast<float*>(kernel_scratch(ctx, size_t(blocks) * size_t(C) * sizeof(float)));
  rmsnorm_backward_fused_kernel<NCH><<<unsigned(blocks), kWarpsPerBlock * 32, smem, ctx.stream>>>(
      dx, partial, dout, x, w, rstd, rows, C, accumulate);
  CUDA_CHECK_LAST();
  rmsnorm_backward_dw_final_kernel<<<unsigned((C + 255) / 256), 256, 0, ctx.stream>>>(dw, partial, blocks, C);
  CUDA_CHECK_LAST();
}

}  // namespace

void rmsnorm_forward(bf16* out, float* rstd, const bf16* x, const bf16* w, int rows, int C, float eps,
                     const GpuContext& ctx) {
  if (rows <= 0 || C <= 0) return;
  const bool vec = C % kVec == 0 && detail::aligned16(out) && detail::aligned16(x) && detail::aligned16(w);
  if (use_row_blocks(rows, C, vec, ctx)) {
    launch_dependent(rmsnorm_row_block_kernel<false>, dim3(unsigned(rows)), dim3(kRowThreads), 0, ctx.stream, nullptr,
                     out, rstd, x, nullptr, w, C, eps);
    CUDA_CHECK_LAST();
    return;
  }
  launch_dependent(rmsnorm_forward_kernel, dim3(row_blocks(rows)), dim3(kWarpsPerBlock * 32), 0, ctx.stream, out, rstd,
                   x, w, rows, C, eps, vec);
  CUDA_CHECK_LAST();
}

void add_rmsnorm_forward(bf16* sum, bf16* out, float* rstd, const bf16* a, const bf16* b, const bf16* w, int rows,
                         int C, float eps, const GpuContext& ctx) {
  if (rows <= 0 || C <= 0) return;
  const bool vec = C % kVec == 0 && detail::aligned16(sum) && detail::aligned16(out) && detail::aligned16(a) &&
                   detail::aligned16(b) && detail::aligned16(w);
  if (use_row_blocks(rows, C, vec, ctx)) {
    launch_dependent(rmsnorm_row_block_kernel<true>, dim3(unsigned(rows)), dim3(kRowThreads), 0, ctx.stream, sum, out,
                     rstd, a, b, w, C, eps);
    CUDA_CHECK_LAST();
    return;
  }
  launch_dependent(add_rmsnorm_forward_kernel, dim3(row_blocks(rows)), dim3(kWarpsPerBlock * 32), 0, ctx.stream, sum,
                   out, rstd, a, b, w, rows, C, eps, vec);
  CUDA_CHECK_LAST();
}

void rmsnorm_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                      int rows, int C, bool accumulate, const GpuContext& ctx) {
  if (rows <= 0 || C <= 0) return;
  const bool vec = C % kVec == 0 && detail::aligned16(dx) && detail::aligned16(dout) && detail::aligned16(x) &&
                   detail::aligned16(w);
  const int chunks = (C + 32 * kVec - 1) / (32 * kVec);
  if (vec && chunks <= kMaxFusedChunks) {
    switch (chunks) {
      case 1: launch_fused_backward<1>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 2: launch_fused_backward<2>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 3: launch_fused_backward<3>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 4: launch_fused_backward<4>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 5: launch_fused_backward<5>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 6: launch_fused_backward<6>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      case 7: launch_fused_backward<7>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
      default: launch_fused_backward<8>(dx, dw, dout, x, w, rstd, rows, C, accumulate, ctx); return;
    }
  }
  rmsnorm_backward_dx_kernel<<<row_blocks(rows), kWarpsPerBlock * 32, 0, ctx.stream>>>(dx, dout, x, w, rstd, rows,
                                                                                        C, vec, accumulate);
  CUDA_CHECK_LAST();

  // Slices of rows: enough blocks for ~4 per SM, never a slice without rows. The count depends only on the shape
  // and the SM count, so the summation order (and the result) is reproducible.
  const int col_blocks = (C + 31) / 32;
  const int max_slices = (rows + kDwRowsPerBlock - 1) / kDwRowsPerBlock;
  const int want = ((ctx.sm_count > 0 ? ctx.sm_count : 132) * 4 + col_blocks - 1) / col_blocks;
  const int slices = want < max_slices ? (want > 0 ? want : 1) : max_slices;
  float* partial = slices > 1 ? static_cast<float*>(kernel_scratch(ctx, size_t(slices) * size_t(C) * sizeof(float)))
                              : nullptr;
  const dim3 grid{unsigned(col_blocks), unsigned(slices)}, block{32, kDwRowsPerBlock};
  rmsnorm_backward_dw_partial_kernel<<<grid, block, 0, ctx.stream>>>(partial, dw, dout, x, rstd, rows, C);
  CUDA_CHECK_LAST();
  if (partial) {
    rmsnorm_backward_dw_final_kernel<<<unsigned((C + 255) / 256), 256, 0, ctx.stream>>>(dw, partial, slices, C);
    CUDA_CHECK_LAST();
  }
}

}  // namespace hone::cuda
