// Kernels of the fused LM head (see cuda/lm_head.cpp for the chunking): online log-sum-exp and entropy statistics
// per row, the gradient with respect to the logits, and the final accumulation of dh. Also the vocabulary-parallel
// ops that touch only per-row statistics: lm_head_stats_rescale and lm_head_stats_finish.
#include <cmath>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/lm_head_kernels.h"
#include "cuda/lm_head_rows.cuh"

namespace hone::cuda {

namespace {

constexpr int kStatsThreads = 256;
constexpr int kElemThreads = 256;

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide reductions; every thread gets the result. `sh` holds 32 floats; the leading barrier lets consecutive
// reductions reuse it (all threads have read the previous result before it is overwritten).
__device__ float block_max(float v, float* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? sh[lane] : -INFINITY);
}

__device__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? sh[lane] : 0.f);
}

// The register path: a row of at most kRegVecs x 4 x kStatsThreads values (8192: the default chunk) is read once,
// 16 bytes a load, every load of a thread in flight together, and held in registers for the sums and the kept copy.
constexpr int kRegVecs = 8;

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

// One block per row. kRegs (n a multiple of 4, at most kRegVecs x 4 x kStatsThreads, rows 16-byte aligned): the
// row is read once into registers. Otherwise two passes over the row's chunk (the second hits L1/L2). Either way:
// the chunk max, then the sums relative to the new running max M, merged with the old sums moved to M:
// exp(z - M) = exp(z - m) exp(m - M), so s' = f s and u' = f (u + (m - M) s) with f = exp(m - M) (as the CPU twin).
template <bool kRegs>
__global__ void __launch_bounds__(kStatsThreads)
    chunk_stats_kernel(const float* __restrict__ z, int n, int col0, int first, int last,
                       const int32_t* __restrict__ targets, LmHeadRowState st, LmHeadRowOutputs out,
                       LmHeadSavedChunk saved) {
  __shared__ float sh[32];
  const int r = blockIdx.x;
  const int target = targets[r];
  if (target < 0) {  // uniform over the block: the whole block leaves before any barrier
    if (last && threadIdx.x == 0) detail::write_untargeted_row(out, r);
    return;
  }
  const float* zr = z + int64_t(r) * n;
  const float m_old = first ? -INFINITY : st.m[r];  // read by all threads before thread 0 rewrites it below
  __half* kept = saved.z ? saved.z + int64_t(r) * saved.ld : nullptr;
  float cm = -INFINITY, ps = 0.f, pu = 0.f, M;
  if constexpr (kRegs) {
    const int n4 = n / 4;
    const float4* z4 = reinterpret_cast<const float4*>(zr);
    float4 v[kRegVecs];
#pragma unroll
    for (int k = 0; k < kRegVecs; ++k) {
      const int i = threadIdx.x + k * kStatsThreads;
      if (i < n4) {
        v[k] = z4[i];
        cm = fmaxf(cm, max4(v[k]));
      }
    }
    cm = block_max(cm, sh);
    M = fmaxf(m_old, cm);
#pragma unroll
    for (int k = 0; k < kRegVecs; ++k) {
      const int i = threadIdx.x + k * kStatsThreads;
      if (i >= n4) continue;
      const float d[4] = {v[k].x - M, v[k].y - M, v[k].z - M, v[k].w - M};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float e = expf(d[q]);
        ps += e;
        pu += e * d[q];
      }
      if (kept) {
        const __half2 lo = __floats2half2_rn(fmaxf(d[0], -65504.f), fmaxf(d[1], -65504.f));
        const __half2 hi = __floats2half2_rn(fmaxf(d[2], -65504.f), fmaxf(d[3], -65504.f));
        uint2 packed;
        packed.x = *reinterpret_cast<const unsigned*>(&lo);
        packed.y = *reinterpret_cast<const unsigned*>(&hi);
        *reinterpret_cast<uint2*>(kept + 4 * i) = packed;
      }
    }
  } else {
    for (int j = threadIdx.x; j < n; j += blockDim.x) cm = fmaxf(cm, zr[j]);
    cm = block_max(cm, sh);
    M = fmaxf(m_old, cm);
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      const float d = zr[j] - M, e = expf(d);
      ps += e;
      pu += e * d;
      if (kept) kept[j] = __float2half_rn(fmaxf(d, -65504.f));
    }
  }
  ps = block_sum(ps, sh);
  pu = block_sum(pu, sh);
  if (threadIdx.x != 0) return;
  if (kept) saved.max[r] = M;
  double S = ps, U = pu;
  float zt = out.stats ? 0.f : NAN;  // a slice's target logit is 0 where another slice holds the target
  if (!first) {
    double s_old = st.s[r], u_old = st.u[r];
    if (s_old > 0.0) {
      const double shift = double(m_old) - double(M), f = exp(shift);
      u_old = f * (u_old + shift * s_old);
      s_old *= f;
    }
    S += s_old;
    U += u_old;
    zt = st.zt[r];
  }
  const int tv = target - col0;
  if (tv >= 0 && tv < n) zt = zr[tv];
  if (last) {
    detail::write_row(out, r, M, S, U, zt);
  } else {
    st.m[r] = M;
    st.s[r] = S;
    st.u[r] = U;
    st.zt[r] = zt;
  }
}

__global__ void chunk_dlogits_kernel(bf16* __restrict__ dz, const float* __restrict__ z, int R, int n, int col0,
                                     const int32_t* __restrict__ targets, const float* __restrict__ dlogprob,
                                     const float* __restrict__ dentropy, const float* __restrict__ lse,
                                     const float* __restrict__ entropy, float temperature) {
  const int64_t total = int64_t(R) * n;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int r = int(i / n), j = int(i - int64_t(r) * n);
    const int target = targets[r];
    float g = 0.f;
    if (target >= 0) {
      const float logp = z[i] - lse[r];
      const float p = expf(logp);
      g = dlogprob[r] * ((j == target - col0 ? 1.f : 0.f) - p);
      if (dentropy) g += dentropy[r] * (-p * (logp + entropy[r]));
      g /= temperature;
    }
    dz[i] = __float2bfloat16(g);
  }
}

// Eight columns a thread (one 16-byte load and store; ld is a multiple of 8), a row per blockIdx.y. Keeping z
// relative to the running max bounds its fp16 error by 2^-11 (M - z), so p = exp(z - lse) stays accurate where p is
// large: its relative error is at most 2^-11 x with x = M - z, and p <= e^-x.
constexpr int kSavedCols = 8;

__global__ void saved_dlogits_kernel(__half* __restrict__ z, int64_t ld, const float* __restrict__ max,
                                     int64_t max_stride, int V, int chunk_v, const int32_t* __restrict__ targets,
                                     const float* __restrict__ dlogprob, const float* __restrict__ dentropy,
                                     const float* __restrict__ lse, const float* __restrict__ entropy,
                                     float temperature) {
  const int r = blockIdx.y;
  const int j0 = (blockIdx.x * blockDim.x + threadIdx.x) * kSavedCols;
  if (j0 >= V) return;
  __half* zr = z + int64_t(r) * ld + j0;
  const int target = targets[r];
  __align__(16) __half in[kSavedCols];
  __align__(16) bf16 v[kSavedCols];
  if (target < 0) {
    for (int k = 0; k < kSavedCols; ++k) v[k] = __float2bfloat16(0.f);
  } else {
    *reinterpret_cast<uint4*>(in) = *reinterpret_cast<const uint4*>(zr);
    const float g_lp = dlogprob[r], g_h = dentropy ? dentropy[r] : 0.f, l = lse[r];
    const float H = dentropy ? entropy[r] : 0.f, inv_t = 1.f / temperature;
    for (int k = 0; k < kSavedCols; ++k) {
      const int j = j0 + k;
      if (j >= V) {  // the row's padding columns: never read by the GEMMs
        v[k] = __float2bfloat16(0.f);
        continue;
      }
      const float logp = __half2float(in[k]) + max[int64_t(j / chunk_v) * max_stride + r] - l;
      const float p = expf(logp);
      float g = g_lp * ((j == target ? 1.f : 0.f) - p);
      if (dentropy) g += g_h * (-p * (logp + H));
      v[k] = __float2bfloat16(g * inv_t);
    }
  }
  *reinterpret_cast<uint4*>(zr) = *reinterpret_cast<const uint4*>(v);
}

__global__ void accumulate_kernel(bf16* __restrict__ dst, const float* __restrict__ src, int64_t N) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16(__bfloat162float(dst[i]) + src[i]);
}

// (-inf, 0, 0, 0) per row of stats[4, T]: the statistics of no logits at all.
__global__ void stats_empty_kernel(float* __restrict__ stats, int T) {
  const int64_t N = 4 * int64_t(T);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += int64_t(gridDim.x) * blockDim.x)
    stats[i] = i < T ? -INFINITY : 0.f;
}

// As cpu::lm_head_stats_rescale, in double as there (T values: the cost is nothing). A slice that saw no logits for
// a row (s = 0, m = -inf) keeps zeros: exp(m - M) would be NaN when M is -inf too (a row without target).
__global__ void stats_rescale_kernel(float* __restrict__ stats, const float* __restrict__ common_max, int T) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < T; t += int64_t(gridDim.x) * blockDim.x) {
    const float m = stats[t], M = common_max[t], s = stats[T + t], u = stats[2 * int64_t(T) + t];
    float s2 = 0.f, u2 = 0.f;
    if (s > 0.f) {  // exp(z - M) = exp(z - m) exp(m - M)
      const double shift = double(m) - double(M), f = exp(shift);
      u2 = float(f * (double(u) + shift * double(s)));
      s2 = float(f * double(s));
    }
    stats[t] = M;
    stats[T + t] = s2;
    stats[2 * int64_t(T) + t] = u2;
  }
}

// As cpu::lm_head_stats_finish (double where it uses double).
__global__ void stats_finish_kernel(float* __restrict__ logprob, float* __restrict__ entropy, float* __restrict__ lse,
                                    const float* __restrict__ stats, const int32_t* __restrict__ targets, int T) {
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < T; t += int64_t(gridDim.x) * blockDim.x) {
    if (targets[t] < 0) {
      logprob[t] = 0.f;
      lse[t] = 0.f;
      if (entropy) entropy[t] = 0.f;
      continue;
    }
    const double s = stats[T + t], log_s = log(s);
    const float l = float(double(stats[t]) + log_s);
    lse[t] = l;
    logprob[t] = stats[3 * int64_t(T) + t] - l;
    if (entropy) entropy[t] = float(log_s - double(stats[2 * int64_t(T) + t]) / s);
  }
}

int elementwise_blocks(int64_t N, const GpuContext& ctx) {
  const int64_t want = (N + kElemThreads - 1) / kElemThreads;
  const int64_t cap = int64_t(ctx.sm_count > 0 ? ctx.sm_count : 132) * 16;
  return int(want < cap ? (want > 0 ? want : 1) : cap);
}

}  // namespace

void lm_head_chunk_stats(const float* z, int R, int n, int col0, bool first, bool last, const int32_t* targets,
                         LmHeadRowState st, LmHeadRowOutputs out, LmHeadSavedChunk saved, const GpuContext& ctx) {
  if (R <= 0) return;
  // The register path needs 16-byte rows of z and 8-byte groups of the kept copy (its row stride is a multiple of 8).
  const bool aligned = n % 4 == 0 && reinterpret_cast<uintptr_t>(z) % 16 == 0 &&
                       (!saved.z || reinterpret_cast<uintptr_t>(saved.z) % 8 == 0);
  if (aligned && n <= kRegVecs * 4 * kStatsThreads)
    chunk_stats_kernel<true><<<R, kStatsThreads, 0, ctx.stream>>>(z, n, col0, first ? 1 : 0, last ? 1 : 0, targets,
                                                                  st, out, saved);
  else
    chunk_stats_kernel<false><<<R, kStatsThreads, 0, ctx.stream>>>(z, n, col0, first ? 1 : 0, last ? 1 : 0, targets,
                                                                   st, out, saved);
  CUDA_CHECK_LAST();
}

void lm_head_saved_dlogits(__half* z, int64_t ld, const float* max, int64_t max_stride, int R, int V, int chunk_v,
                           const int32_t* targets, const float* dlogprob, const float* dentropy, const float* lse,
                           const float* entropy, float temperature, const GpuContext& ctx) {
  if (R <= 0 || V <= 0) return;
  HONE_CHECK(ld % kSavedCols == 0 && ld >= V, "kept logits need a row stride >= V and a multiple of 8, got ", ld);
  HONE_CHECK(R <= 65535, "a row block of ", R, " rows is more than one grid dimension holds");
  const int per_block = kElemThreads * kSavedCols;
  const dim3 grid(unsigned((V + per_block - 1) / per_block), unsigned(R));
  saved_dlogits_kernel<<<grid, kElemThreads, 0, ctx.stream>>>(z, ld, max, max_stride, V, chunk_v, targets, dlogprob,
                                                              dentropy, lse, entropy, temperature);
  CUDA_CHECK_LAST();
}

void lm_head_stats_empty(float* stats, int T, const GpuContext& ctx) {
  const int64_t N = 4 * int64_t(T);
  if (N <= 0) return;
  stats_empty_kernel<<<elementwise_blocks(N, ctx), kElemThreads, 0, ctx.stream>>>(stats, T);
  CUDA_CHECK_LAST();
}

void lm_head_chunk_dlogits(bf16* dz, const float* z, int R, int n, int col0, const int32_t* targets,
                           const float* dlogprob, const float* dentropy, const float* lse, const float* entropy,
                           float temperature, const GpuContext& ctx) {
  const int64_t total = int64_t(R) * n;
  if (total <= 0) return;
  chunk_dlogits_kernel<<<elementwise_blocks(total, ctx), kElemThreads, 0, ctx.stream>>>(
      dz, z, R, n, col0, targets, dlogprob, dentropy, lse, entropy, temperature);
  CUDA_CHECK_LAST();
}

void accumulate_f32_into_bf16(bf16* dst, const float* src, int64_t N, const GpuContext& ctx) {
  if (N <= 0) return;
  accumulate_kernel<<<elementwise_blocks(N, ctx), kElemThreads, 0, ctx.stream>>>(dst, src, N);
  CUDA_CHECK_LAST();
}

void lm_head_stats_rescale(float* stats, const float* max, int T, const GpuContext& ctx) {
  HONE_CHECK(T >= 0, "bad row count T=", T);
  if (T == 0) return;
  stats_rescale_kernel<<<elementwise_blocks(T, ctx), kElemThreads, 0, ctx.stream>>>(stats, max, T);
  CUDA_CHECK_LAST();
}

void lm_head_stats_finish(float* logprob, float* entropy, float* lse, const float* stats, const int32_t* targets,
                          int T, const GpuContext& ctx) {
  HONE_CHECK(T >= 0, "bad row count T=", T);
  if (T == 0) return;
  stats_finish_kernel<<<elementwise_blocks(T, ctx), kElemThreads, 0, ctx.stream>>>(logprob, entropy, lse, stats,
                                                                                   targets, T);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
