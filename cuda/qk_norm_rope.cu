// Qwen3's per-head q/k RMSNorm followed by RoPE in one pass over x[T, H, D] (bf16), forward and backward: the
// rows are narrow (D = 128), so the separate rmsnorm and rope kernels (and the generic two-kernel dw reduction)
// spent most of their time on extra passes and a reduction shaped for wide rows.
//
// Layout of the work: G lanes per row (G = the power of two >= D/16), lane j of a row owns the 8 columns
// [8j, 8j+8) and their RoPE partners [D/2 + 8j, D/2 + 8j + 8): two 16-byte loads per tensor per row, and the
// rotation pairs meet in one lane, so no shuffles for the rotation. A warp holds 32/G rows at a time: the heads of
// one token (its H heads in ceil(H / (32/G)) steps), or of several tokens when H < 32/G. Each lane evaluates the
// sincosf of its 8 frequencies once per token, reused over the token's heads; w stays in registers. With few
// tokens (a decode step) the forward gives each warp a slice of a token's head steps instead.
// The arithmetic is rmsnorm.cu's and rope.cu's (fp32, IEEE sqrt and division, full-precision sincosf), except that
// the normed row stays in fp32 into the rotation: out is rounded once.
// Backward: dn = R^T dout, dx = rstd (dn w - x rstd^2 sum(dn w x)/D) WRITTEN in bf16. dw is deterministic: a fixed
// grid (it depends on T, H, D and the SM count only) strides over the tokens, each lane sums dn x rstd of its
// columns in registers, the block adds its warps in a fixed order and writes one partial row; a second kernel adds
// the partial rows in order into dw (fp32, accumulated). With one block the first kernel adds into dw directly.
#include <algorithm>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/elementwise_common.cuh"
#include "cuda/kernel_scratch.h"
#include "cuda/ops_cuda.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {

using detail::kVec;

constexpr int kWarps = 8;                 // warps per block
constexpr int kThreads = kWarps * 32;
constexpr int kMaxD = 512;                // 32 lanes x 16 columns
constexpr int kBackwardBlocksPerSm = 4;   // the backward's fixed grid
constexpr int kForwardWarpsPerSm = 16;    // the forward spreads a token's heads over warps below this many

// Sum over the G lanes of a row (G a power of two, rows aligned to G lanes). Every lane of the warp calls it.
template <int G>
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Where a lane works: column block j of its row group, the groups of one warp step spread over P tokens of Hc
// heads each (Hc = min(H, 32/G)).
template <int G>
struct LaneMap {
  static constexpr int kRows = 32 / G;  // rows a warp holds at a time
  int j, group, Hc, P, head0, steps;
  bool lane_on;  // the lane has columns (j < D/16) and its group has a token slot
  __device__ LaneMap(int H, int D) {
    const int lane = threadIdx.x & 31;
    j = lane % G;
    group = lane / G;
    Hc = H < kRows ? H : kRows;
    P = kRows / Hc;
    head0 = group % Hc;
    steps = (H + Hc - 1) / Hc;
    lane_on = j * 16 < D && group < P * Hc;
  }
  __device__ int token(int unit) const { return unit * P + group / Hc; }
};

__device__ __forceinline__ void token_angles(float (&cs)[kVec], float (&sn)[kVec], const float (&f)[kVec],
                                             int32_t pos) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) sincosf(float(pos) * f[k], &sn[k], &cs[k]);
}

template <int G>
__global__ void __launch_bounds__(kThreads) qk_norm_rope_forward_kernel(bf16* out, float* rstd, const bf16* x,
                                                                        const bf16* w, const int32_t* pos,
                                                                        const float* inv_freq, int T, int H, int D,
                                                                        float eps, int slices, int64_t ldx) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const LaneMap<G> m(H, D);
  const int warp = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int unit = warp / slices, slice = warp % slices;
  if (unit * m.P >= T) return;  // the whole warp: no row of it exists
  const int per = (m.steps + slices - 1) / slices, s_begin = slice * per;
  const int s_end = m.steps < s_begin + per ? m.steps : s_begin + per;
  const int half = D / 2, t = m.token(unit);
  const bool live = m.lane_on && t < T;
  const int lo_col = kVec * m.j, hi_col = half + kVec * m.j;
  float wl[kVec], wh[kVec], f[kVec], cs[kVec], sn[kVec];
  if (live) {
    detail::load8(wl, w + lo_col);
    detail::load8(wh, w + hi_col);
#pragma unroll
    for (int k = 0; k < kVec; ++k) f[k] = inv_freq[lo_col + k];
    token_angles(cs, sn, f, pos[t]);
  }
  for (int s = s_begin; s < s_end; ++s) {  // the same count in every lane: the row sums need the whole warp
    const int h = m.head0 + s * m.Hc;
    const bool ok = live && h < H;
    const int64_t row = int64_t(t) * H + h;
    float a[kVec], b[kVec], ss = 0.f;
    if (ok) {
      const bf16* xr = x + int64_t(t) * ldx + int64_t(h) * D;
      detail::load8(a, xr + lo_col);
      detail::load8(b, xr + hi_col);
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += a[k] * a[k];
#pragma unroll
      for (int k = 0; k < kVec; ++k) ss += b[k] * b[k];
    }
    ss = row_sum<G>(ss);
    if (!ok) continue;
    const float rs = 1.0f / sqrtf(ss / float(D) + eps);
    if (m.j == 0) rstd[row] = rs;
    float ol[kVec], oh[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float na = wl[k] * (a[k] * rs), nb = wh[k] * (b[k] * rs);
      ol[k] = na * cs[k] + (-nb) * sn[k];
      oh[k] = nb * cs[k] + na * sn[k];
    }
    detail::store8(out + row * D + lo_col, ol);
    detail::store8(out + row * D + hi_col, oh);
  }
}

// partial == nullptr: one block, which adds its sums into dw itself.
template <int G>
__global__ void __launch_bounds__(kThreads) qk_norm_rope_backward_kernel(bf16* dx, float* partial, float* dw,
                                                                         const bf16* dout, const bf16* x,
                                                                         const bf16* w, const float* rstd,
                                                                         const int32_t* pos, const float* inv_freq,
                                                                         int T, int H, int D) {
  __shared__ float warp_dw[kWarps][kMaxD];
  const LaneMap<G> m(H, D);
  const int warp = threadIdx.x >> 5;
  const int half = D / 2, lo_col = kVec * m.j, hi_col = half + kVec * m.j;
  const int units = (T + m.P - 1) / m.P;
  float wl[kVec], wh[kVec], f[kVec], accl[kVec], acch[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) accl[k] = acch[k] = 0.f;
  if (m.lane_on) {
    detail::load8(wl, w + lo_col);
    detail::load8(wh, w + hi_col);
#pragma unroll
    for (int k = 0; k < kVec; ++k) f[k] = inv_freq[lo_col + k];
  }
  // Units (P tokens each) are dealt to the warps of the grid in a fixed pattern: the loop bound is the same for
  // every lane of a warp.
  for (int unit = blockIdx.x * kWarps + warp; unit < units; unit += gridDim.x * kWarps) {
    const int t = m.token(unit);
    const bool live = m.lane_on && t < T;
    float cs[kVec], sn[kVec];
    if (live) token_angles(cs, sn, f, pos[t]);
    for (int s = 0; s < m.steps; ++s) {
      const int h = m.head0 + s * m.Hc;
      const bool ok = live && h < H;
      const int64_t row = int64_t(t) * H + h;
      float dl[kVec], dh[kVec], xl[kVec], xh[kVec], dot = 0.f, rs = 0.f;
      if (ok) {
        float gl[kVec], gh[kVec];
        detail::load8(gl, dout + row * D + lo_col);
        detail::load8(gh, dout + row * D + hi_col);
        detail::load8(xl, x + row * D + lo_col);
        detail::load8(xh, x + row * D + hi_col);
        rs = rstd[row];
#pragma unroll
        for (int k = 0; k < kVec; ++k) {
          dl[k] = gl[k] * cs[k] + gh[k] * sn[k];
          dh[k] = gh[k] * cs[k] - gl[k] * sn[k];
        }
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += dl[k] * wl[k] * xl[k];
#pragma unroll
        for (int k = 0; k < kVec; ++k) dot += dh[k] * wh[k] * xh[k];
      }
      dot = row_sum<G>(dot);
      if (!ok) continue;
      const float kk = dot / float(D) * rs * rs;
      float ol[kVec], oh[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        ol[k] = rs * (dl[k] * wl[k] - xl[k] * kk);
        oh[k] = rs * (dh[k] * wh[k] - xh[k] * kk);
        accl[k] += dl[k] * xl[k] * rs;
        acch[k] += dh[k] * xh[k] * rs;
      }
      detail::store8(dx + row * D + lo_col, ol);
      detail::store8(dx + row * D + hi_col, oh);
    }
  }
  // The warp's row groups hold the same columns: add them (lanes j, j + G, j + 2G, ...), then the block's warps in
  // order. Lanes without columns hold zeros and write nothing.
#pragma unroll
  for (int o = G; o < 32; o <<= 1)
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      accl[k] += __shfl_xor_sync(0xffffffffu, accl[k], o);
      acch[k] += __shfl_xor_sync(0xffffffffu, acch[k], o);
    }
  if (m.group == 0 && m.j * 16 < D) {
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      warp_dw[warp][lo_col + k] = accl[k];
      warp_dw[warp][hi_col + k] = acch[k];
    }
  }
  __syncthreads();
  for (int c = threadIdx.x; c < D; c += kThreads) {
    float sum = 0.f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += warp_dw[v][c];
    if (partial)
      partial[int64_t(blockIdx.x) * D + c] = sum;
    else
      dw[c] += sum;
  }
}

__global__ void dw_final_kernel(float* dw, const float* partial, int blocks, int D) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= D) return;
  float sum = 0.f;
  for (int b = 0; b < blocks; ++b) sum += partial[int64_t(b) * D + c];
  dw[c] += sum;
}

// Lanes per row: the power of two covering D/16 columns blocks.
int lanes_per_row(int D) {
  int g = 1;
  while (g * 16 < D) g *= 2;
  return g;
}

void check_args(int H, int D, const void* a, const void* b, const void* c, const void* d) {
  HONE_CHECK(D > 0 && D % 16 == 0 && D <= kMaxD, "qk_norm_rope: head_dim must be a positive multiple of 16, at most ",
             kMaxD, ", got ", D);
  HONE_CHECK(H > 0, "qk_norm_rope: needs at least one head, got ", H);
  HONE_CHECK(detail::aligned16(a) && detail::aligned16(b) && detail::aligned16(c) && detail::aligned16(d),
             "qk_norm_rope: tensors must be 16-byte aligned");
}

// Steps a warp unit takes over the heads of its tokens (LaneMap::steps).
int head_steps(int H, int D) {
  const int rows = 32 / lanes_per_row(D), Hc = H < rows ? H : rows;
  return (H + Hc - 1) / Hc;
}

// Warp units (P tokens each) for T tokens.
int units_for(int T, int H, int D) {
  const int rows = 32 / lanes_per_row(D), Hc = H < rows ? H : rows, P = rows / Hc;
  return (T + P - 1) / P;
}

template <int G>
void launch_forward(unsigned blocks, bf16* out, float* rstd, const bf16* x, const bf16* w, const int32_t* pos,
                    const float* inv_freq, int T, int H, int D, float eps, int slices, int64_t ldx,
                    const GpuContext& ctx) {
  launch_dependent(qk_norm_rope_forward_kernel<G>, dim3(blocks), dim3(kThreads), 0, ctx.stream, out, rstd, x, w, pos,
                   inv_freq, T, H, D, eps, slices, ldx);
}

template <int G>
void launch_backward(unsigned blocks, bf16* dx, float* partial, float* dw, const bf16* dout, const bf16* x,
                     const bf16* w, const float* rstd, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                     const GpuContext& ctx) {
  qk_norm_rope_backward_kernel<G>
      <<<blocks, kThreads, 0, ctx.stream>>>(dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D);
}

}  // namespace

void qk_norm_rope_forward(bf16* out, float* rstd, const bf16* x, const bf16* w, const int32_t* pos,
                          const float* inv_freq, int T, int H, int D, float eps, const GpuContext& ctx,
                          int64_t ldx) {
  if (T <= 0) return;
  check_args(H, D, out, x, w, x);
  HONE_CHECK(ldx == 0 || (ldx >= int64_t(H) * D && ldx % 8 == 0), "q/k norm + RoPE input row stride ", ldx,
             " must be 0 or a multiple of 8 of at least H * D = ", H * D);
  if (ldx == 0) ldx = int64_t(H) * D;
  // Few tokens (a decode step): a token's head steps are spread over several warps, so no warp walks its heads one
  // load latency after another while most SMs idle. Each row is computed the same way either way.
  const int units = units_for(T, H, D), steps = head_steps(H, D);
  const int want = (ctx.sm_count > 0 ? ctx.sm_count : 132) * kForwardWarpsPerSm;
  const int slices = units >= want ? 1 : std::min(steps, (want + units - 1) / units);
  const unsigned blocks = unsigned((int64_t(units) * slices + kWarps - 1) / kWarps);
  switch (lanes_per_row(D)) {
    case 1: launch_forward<1>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
    case 2: launch_forward<2>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
    case 4: launch_forward<4>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
    case 8: launch_forward<8>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
    case 16: launch_forward<16>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
    default: launch_forward<32>(blocks, out, rstd, x, w, pos, inv_freq, T, H, D, eps, slices, ldx, ctx); break;
  }
  CUDA_CHECK_LAST();
}

void qk_norm_rope_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                           const int32_t* pos, const float* inv_freq, int T, int H, int D, const GpuContext& ctx) {
  if (T <= 0) return;
  check_args(H, D, dx, dout, x, w);
  // A fixed grid: the blocks (and so the dw partial sums and their order) depend on the shape and SM count only.
  const int need = (units_for(T, H, D) + kWarps - 1) / kWarps;
  const int cap = (ctx.sm_count > 0 ? ctx.sm_count : 132) * kBackwardBlocksPerSm;
  const int blocks = need < cap ? need : cap;
  float* partial =
      blocks > 1 ? static_cast<float*>(kernel_scratch(ctx, size_t(blocks) * size_t(D) * sizeof(float))) : nullptr;
  const unsigned b = unsigned(blocks);
  switch (lanes_per_row(D)) {
    case 1: launch_backward<1>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
    case 2: launch_backward<2>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
    case 4: launch_backward<4>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
    case 8: launch_backward<8>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
    case 16: launch_backward<16>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
    default: launch_backward<32>(b, dx, partial, dw, dout, x, w, rstd, pos, inv_freq, T, H, D, ctx); break;
  }
  CUDA_CHECK_LAST();
  if (partial) {
    dw_final_kernel<<<unsigned((D + 127) / 128), 128, 0, ctx.stream>>>(dw, partial, blocks, D);
    CUDA_CHECK_LAST();
  }
}

}  // namespace hone::cuda
