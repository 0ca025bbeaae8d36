// The plain CUDA attention over packed causal sequences with grouped-query heads, and over the segments of a ring
// attention block: the fallback where cuDNN refuses a configuration (or HONE_ATTENTION=reference) and a second GPU
// reference in the tests. Straightforward on
// purpose: one warp per query row (forward, dq) or per key row (dk, dv), each lane holding D/32 features in fp32
// registers, scores reduced across the warp, an online softmax in the forward. Every output element is written by
// exactly one warp, so gradients need no atomics (computed in fp32, rounded to bf16 once): the packed attention's
// are written (as cuDNN writes them), a block's are added to the bf16 value already there.
#include <cmath>

#include "cuda/attention_cudnn.h"
#include "cuda/check.h"

namespace hone::cuda {

namespace {

constexpr int kChunks = kAttentionReferenceMaxD / 32;  // features per lane
constexpr int kWarps = 4;                              // warps per block
constexpr unsigned kFull = 0xffffffffu;

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
  return x;
}

// Loads row p[0, D) into this lane's registers (feature lane + 32 c), zero past D.
__device__ inline void load_row(float (&r)[kChunks], const bf16* p, int D, int lane) {
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    r[c] = d < D ? __bfloat162float(p[d]) : 0.f;
  }
}

__device__ inline float dot_row(const float (&r)[kChunks], const bf16* p, int D, int lane) {
  float part = 0.f;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) part += r[c] * __bfloat162float(p[d]);
  }
  return warp_sum(part);
}

// Warp per (t, h), h fastest: row index (t * Hq + h) is also the q/out row offset / D.
__global__ void forward_kernel(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu,
                               int num_seqs, int T, int Hq, int Hkv, int D, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= int64_t(T) * Hq) return;  // the whole warp leaves together
  const int t = int(row / Hq), h = int(row % Hq), g = h / (Hq / Hkv);
  const int start = cu[attention_sequence_of_row(cu, num_seqs, t)];
  float qr[kChunks], acc[kChunks];
  load_row(qr, q + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int j = start; j <= t; ++j) {
    const int64_t kv = (int64_t(j) * Hkv + g) * D;
    const float sc = scale * dot_row(qr, k + kv, D, lane);
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(sc - m_new);
    l = l * corr + p;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      acc[c] = acc[c] * corr + (d < D ? p * __bfloat162float(v[kv + d]) : 0.f);
    }
    m = m_new;
  }
  const float inv_l = 1.f / l;  // l >= 1: the row always sees itself
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) out[row * D + d] = __float2bfloat16(acc[c] * inv_l);
  }
  if (lane == 0) lse[int64_t(h) * T + t] = m + logf(l);
}

// delta[h, t] = dout[t, h, :] . out[t, h, :]
__global__ void delta_kernel(float* delta, const bf16* dout, const bf16* out, int T, int Hq, int D) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= int64_t(T) * Hq) return;
  const int t = int(row / Hq), h = int(row % Hq);
  float gr[kChunks];
  load_row(gr, dout + row * D, D, lane);
  const float s = dot_row(gr, out + row * D, D, lane);
  if (lane == 0) delta[int64_t(h) * T + t] = s;
}

// dq[t, h] = scale * sum_j P_tj (dP_tj - delta_t) k_j over j in [start, t].
__global__ void dq_kernel(bf16* dq, const bf16* dout, const float* lse, const float* delta, const bf16* q,
                          const bf16* k, const bf16* v, const int32_t* cu, int num_seqs, int T, int Hq, int Hkv,
                          int D, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= int64_t(T) * Hq) return;
  const int t = int(row / Hq), h = int(row % Hq), g = h / (Hq / Hkv);
  const int start = cu[attention_sequence_of_row(cu, num_seqs, t)];
  const float li = lse[int64_t(h) * T + t], di = delta[int64_t(h) * T + t];
  float qr[kChunks], gr[kChunks], acc[kChunks];
  load_row(qr, q + row * D, D, lane);
  load_row(gr, dout + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.f;
  for (int j = start; j <= t; ++j) {
    const int64_t kv = (int64_t(j) * Hkv + g) * D;
    const float p = expf(scale * dot_row(qr, k + kv, D, lane) - li);
    const float ds = p * (dot_row(gr, v + kv, D, lane) - di) * scale;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < D) acc[c] += ds * __bfloat162float(k[kv + d]);
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) dq[row * D + d] = __float2bfloat16(acc[c]);
  }
}

// Warp per key row (j, g), g fastest: dv_j = sum P_ij dout_i, dk_j = scale * sum P_ij (dP_ij - delta_i) q_i over
// the group's query heads and rows i in [j, end of the sequence).
__global__ void dkdv_kernel(bf16* dk, bf16* dv, const bf16* dout, const float* lse, const float* delta,
                            const bf16* q, const bf16* k, const bf16* v, const int32_t* cu, int num_seqs, int T,
                            int Hq, int Hkv, int D, float scale) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= int64_t(T) * Hkv) return;
  const int j = int(row / Hkv), g = int(row % Hkv), group = Hq / Hkv;
  const int end = cu[attention_sequence_of_row(cu, num_seqs, j) + 1];
  float kr[kChunks], vr[kChunks], dk_acc[kChunks], dv_acc[kChunks];
  load_row(kr, k + row * D, D, lane);
  load_row(vr, v + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) dk_acc[c] = dv_acc[c] = 0.f;
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i = j; i < end; ++i) {
      const int64_t qo = (int64_t(i) * Hq + h) * D;
      const float p = expf(scale * dot_row(kr, q + qo, D, lane) - lse[int64_t(h) * T + i]);
      const float ds = p * (dot_row(vr, dout + qo, D, lane) - delta[int64_t(h) * T + i]) * scale;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d = lane + 32 * c;
        if (d < D) {
          dv_acc[c] += p * __bfloat162float(dout[qo + d]);
          dk_acc[c] += ds * __bfloat162float(q[qo + d]);
        }
      }
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) {
      dk[row * D + d] = __float2bfloat16(dk_acc[c]);
      dv[row * D + d] = __float2bfloat16(dv_acc[c]);
    }
  }
}

// ---- the blocks of ring attention: full attention of query segments against key segments -------------------------
// Grid (warp blocks over max_q * Hq, segments): warp per (query row i of segment s, head h), h fastest.
__global__ void block_forward_kernel(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                     AttentionSegments seg, int Tq, int Hq, int Hkv, int D, float scale) {
  const int lane = threadIdx.x & 31, s = blockIdx.y;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= int64_t(seg.q_len[s]) * Hq) return;
  const int t = seg.q_start[s] + int(r / Hq), h = int(r % Hq), g = h / (Hq / Hkv);
  const int64_t row = int64_t(t) * Hq + h;
  float qr[kChunks], acc[kChunks];
  load_row(qr, q + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.f;
  float m = -INFINITY, l = 0.f;
  for (int j = seg.kv_start[s]; j < seg.kv_start[s] + seg.kv_len[s]; ++j) {
    const int64_t kv = (int64_t(j) * Hkv + g) * D;
    const float sc = scale * dot_row(qr, k + kv, D, lane);
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new);
    const float p = expf(sc - m_new);
    l = l * corr + p;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      acc[c] = acc[c] * corr + (d < D ? p * __bfloat162float(v[kv + d]) : 0.f);
    }
    m = m_new;
  }
  const float inv_l = 1.f / l;  // kv_len >= 1
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) out[row * D + d] = __float2bfloat16(acc[c] * inv_l);
  }
  if (lane == 0) lse[int64_t(h) * Tq + t] = m + logf(l);
}

__global__ void block_dq_kernel(bf16* dq, const bf16* dout, const float* lse, const float* delta, const bf16* q,
                                const bf16* k, const bf16* v, AttentionSegments seg, int Tq, int Hq, int Hkv, int D,
                                float scale) {
  const int lane = threadIdx.x & 31, s = blockIdx.y;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= int64_t(seg.q_len[s]) * Hq) return;
  const int t = seg.q_start[s] + int(r / Hq), h = int(r % Hq), g = h / (Hq / Hkv);
  const int64_t row = int64_t(t) * Hq + h;
  const float li = lse[int64_t(h) * Tq + t], di = delta[int64_t(h) * Tq + t];
  float qr[kChunks], gr[kChunks], acc[kChunks];
  load_row(qr, q + row * D, D, lane);
  load_row(gr, dout + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.f;
  for (int j = seg.kv_start[s]; j < seg.kv_start[s] + seg.kv_len[s]; ++j) {
    const int64_t kv = (int64_t(j) * Hkv + g) * D;
    const float p = expf(scale * dot_row(qr, k + kv, D, lane) - li);
    const float ds = p * (dot_row(gr, v + kv, D, lane) - di) * scale;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < D) acc[c] += ds * __bfloat162float(k[kv + d]);
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) dq[row * D + d] = __float2bfloat16(__bfloat162float(dq[row * D + d]) + acc[c]);
  }
}

// Grid (warp blocks over max_kv * Hkv, segments): warp per (key row j of segment s, kv head g).
__global__ void block_dkdv_kernel(bf16* dk, bf16* dv, const bf16* dout, const float* lse, const float* delta,
                                  const bf16* q, const bf16* k, const bf16* v, AttentionSegments seg, int Tq, int Hq,
                                  int Hkv, int D, float scale) {
  const int lane = threadIdx.x & 31, s = blockIdx.y, group = Hq / Hkv;
  const int64_t r = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= int64_t(seg.kv_len[s]) * Hkv) return;
  const int j = seg.kv_start[s] + int(r / Hkv), g = int(r % Hkv);
  const int64_t row = int64_t(j) * Hkv + g;
  float kr[kChunks], vr[kChunks], dk_acc[kChunks], dv_acc[kChunks];
  load_row(kr, k + row * D, D, lane);
  load_row(vr, v + row * D, D, lane);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) dk_acc[c] = dv_acc[c] = 0.f;
  for (int h = g * group; h < (g + 1) * group; ++h)
    for (int i = seg.q_start[s]; i < seg.q_start[s] + seg.q_len[s]; ++i) {
      const int64_t qo = (int64_t(i) * Hq + h) * D;
      const float p = expf(scale * dot_row(kr, q + qo, D, lane) - lse[int64_t(h) * Tq + i]);
      const float ds = p * (dot_row(vr, dout + qo, D, lane) - delta[int64_t(h) * Tq + i]) * scale;
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int d = lane + 32 * c;
        if (d < D) {
          dv_acc[c] += p * __bfloat162float(dout[qo + d]);
          dk_acc[c] += ds * __bfloat162float(q[qo + d]);
        }
      }
    }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < D) {
      dk[row * D + d] = __float2bfloat16(__bfloat162float(dk[row * D + d]) + dk_acc[c]);
      dv[row * D + d] = __float2bfloat16(__bfloat162float(dv[row * D + d]) + dv_acc[c]);
    }
  }
}

unsigned warp_blocks(int64_t rows) { return unsigned((rows + kWarps - 1) / kWarps); }

void check_shape(int num_seqs, int T, int Hq, int Hkv, int D) {
  HONE_CHECK(num_seqs >= 1 && T >= 0, "attention needs at least one sequence, got ", num_seqs, " and T=", T);
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(D > 0 && D <= kAttentionReferenceMaxD, "the reference attention supports head sizes up to ",
             kAttentionReferenceMaxD, ", got ", D);
}

void check_segments(const AttentionSegments& seg, int Hq, int Hkv, int D) {
  HONE_CHECK(seg.count >= 0 && seg.count <= 65535, "attention block: ", seg.count, " segments (at most 65535)");
  check_shape(1, 0, Hq, Hkv, D);
}

}  // namespace

void attention_block_forward_reference(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                       const AttentionSegments& seg, int Tq, int, int Hq, int Hkv, int D,
                                       float scale, const GpuContext& ctx) {
  check_segments(seg, Hq, Hkv, D);
  if (seg.count == 0 || seg.max_q == 0) return;
  const dim3 grid{warp_blocks(int64_t(seg.max_q) * Hq), unsigned(seg.count)};
  block_forward_kernel<<<grid, kWarps * 32, 0, ctx.stream>>>(out, lse, q, k, v, seg, Tq, Hq, Hkv, D, scale);
  CUDA_CHECK_LAST();
}

void attention_block_backward_reference(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                                        const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                        const AttentionSegments& seg, int Tq, int, int Hq, int Hkv, int D,
                                        float scale, float* delta, const GpuContext& ctx) {
  check_segments(seg, Hq, Hkv, D);
  if (seg.count == 0 || seg.max_q == 0 || Tq == 0) return;
  delta_kernel<<<warp_blocks(int64_t(Tq) * Hq), kWarps * 32, 0, ctx.stream>>>(delta, dout, out, Tq, Hq, D);
  CUDA_CHECK_LAST();
  const dim3 qgrid{warp_blocks(int64_t(seg.max_q) * Hq), unsigned(seg.count)};
  block_dq_kernel<<<qgrid, kWarps * 32, 0, ctx.stream>>>(dq, dout, lse, delta, q, k, v, seg, Tq, Hq, Hkv, D, scale);
  CUDA_CHECK_LAST();
  const dim3 kgrid{warp_blocks(int64_t(seg.max_kv) * Hkv), unsigned(seg.count)};
  block_dkdv_kernel<<<kgrid, kWarps * 32, 0, ctx.stream>>>(dk, dv, dout, lse, delta, q, k, v, seg, Tq, Hq, Hkv, D,
                                                           scale);
  CUDA_CHECK_LAST();
}

void attention_forward_reference(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                 const int32_t* cu_seqlens, int num_seqs, int T, int Hq, int Hkv, int D, float scale,
                                 const GpuContext& ctx) {
  check_shape(num_seqs, T, Hq, Hkv, D);
  if (T == 0) return;
  forward_kernel<<<warp_blocks(int64_t(T) * Hq), kWarps * 32, 0, ctx.stream>>>(out, lse, q, k, v, cu_seqlens,
                                                                              num_seqs, T, Hq, Hkv, D, scale);
  CUDA_CHECK_LAST();
}

void attention_backward_reference(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                                  const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                                  int num_seqs, int T, int Hq, int Hkv, int D, float scale, float* delta,
                                  const GpuContext& ctx) {
  check_shape(num_seqs, T, Hq, Hkv, D);
  if (T == 0) return;
  const unsigned q_blocks = warp_blocks(int64_t(T) * Hq), kv_blocks = warp_blocks(int64_t(T) * Hkv);
  delta_kernel<<<q_blocks, kWarps * 32, 0, ctx.stream>>>(delta, dout, out, T, Hq, D);
  CUDA_CHECK_LAST();
  dq_kernel<<<q_blocks, kWarps * 32, 0, ctx.stream>>>(dq, dout, lse, delta, q, k, v, cu_seqlens, num_seqs, T, Hq, Hkv,
                                                      D, scale);
  CUDA_CHECK_LAST();
  dkdv_kernel<<<kv_blocks, kWarps * 32, 0, ctx.stream>>>(dk, dv, dout, lse, delta, q, k, v, cu_seqlens, num_seqs, T,
                                                         Hq, Hkv, D, scale);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
