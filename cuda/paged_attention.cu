// Decode attention over the paged KV cache (cuda/generation_ops.h): one query token per row, grouped-query aware,
// split along the sequence, with a shared-prefix path for GRPO groups. doc/cuda-generation-kernels.md has the design.
//
// One CTA (4 warps) attends a set of up to QMAX query vectors that read the SAME KV head over one token range:
//   * plain path: the Hq / Hkv query heads of one row on one KV head (each KV tile read once for all of them);
//   * prefix path: the rows x query heads of one group on one KV head, over the group's shared prefix blocks.
// Inside a CTA, D / 8 lanes hold one token's K (and V) row as 16-byte vectors, so a warp covers 32 / (D / 8) tokens
// per load and each warp keeps an independent fp32 online softmax (scores pre-multiplied by log2 e, exp2) per
// subgroup of lanes; subgroups merge by shuffles, warps through shared memory. A CTA either writes the bf16 output
// directly (one split, no groups) or a partial (fp32 out normalized by its own sum, and lse in log2 units); a
// combine kernel merges every row's partials (its sequence splits, plus its group's prefix splits) by lse.
//
// Workspace and CUDA graphs: the partials live in the context's kernel scratch (cuda/kernel_scratch.h). The bytes
// depend only on B, Hq, D, max_seq_len, num_groups, max_prefix_len and the SM count (paged_attention_decode_workspace).
// Before capturing a graph, size the scratch for the largest shapes the graph will see, either with
// kernel_scratch(ctx, paged_attention_decode_workspace(largest args, Hq, D, ctx)) or with one uncaptured call at those
// sizes; the scratch never shrinks, so captured launches then see a fixed pointer (growing it during capture would
// call cudaMalloc and fail the capture).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/generation_ops.h"
#include "cuda/kernel_scratch.h"
#include "cuda/paged_attention_args.cuh"

namespace hone::cuda {

namespace {

using paged::Args;
using paged::kThreads;
using paged::kWarps;
using paged::row_start;
using paged::store_merged;

constexpr int kMinSplitTokens = 128;    // never split a sequence into pieces shorter than this
constexpr int kLongSplitTokens = 2048;  // never leave a CTA more tokens than this (long sequences split anyway)
constexpr int kMaxSplits = 64;
constexpr float kLog2e = 1.4426950408889634f;


__device__ __forceinline__ void bf16x8_to_float(const uint4& raw, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// Merges the softmax state (mo, lo, acco) into (m, l, acc); -inf max means empty.
__device__ __forceinline__ void merge_state(float& m, float& l, float* acc, float mo, float lo, const float* acco) {
  const float mn = fmaxf(m, mo);
  if (mn == -INFINITY) return;
  const float a = exp2f(m - mn), b = exp2f(mo - mn);
  l = l * a + lo * b;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = acc[i] * a + acco[i] * b;
  m = mn;
}

// Attends nq (<= QMAX) query vectors (element offsets qoff[r] into q) to KV head h over tokens [t0, t1) of `table`;
// writes the result for vector r at dst[r] (bf16 out row when direct, else partial index into part_o / part_lse).
template <int D, int QMAX>
__device__ void attend(const Args& a, const int32_t* table, int t0, int t1, int h, const int64_t* qoff,
                       const int64_t* dst, int nq, bool direct, float* part_o, float* part_lse) {
  constexpr int L = D / 8;   // lanes per token
  constexpr int S = 32 / L;  // tokens per warp and step
  // Tokens a lane loads before it computes: enough bytes in flight to cover the memory latency. With registers to
  // spare (at most 2 query vectors, or 4 at head dims <= 64, which move half the bytes a load) the next step's
  // loads (block table entry, then keys and values) are issued before this step's arithmetic, so a warp always has
  // a step's bytes in flight; 4 vectors at head dim 64 take 2 tokens a step to stay in registers.
  constexpr bool kPrefetch = QMAX <= 2 || (D <= 64 && QMAX <= 4);
  constexpr int U = QMAX <= 2 ? 4 : 2;
  constexpr int kStep = kWarps * S * U;
  __shared__ float s_acc[kWarps][QMAX][D];
  __shared__ float s_m[kWarps][QMAX], s_l[kWarps][QMAX];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int c = lane % L, sub = lane / L;
  const int bs_mask = (1 << a.block_shift) - 1;

  float q[QMAX][8];
#pragma unroll
  for (int r = 0; r < QMAX; ++r) {
    if (r < nq) {
      const uint4 raw = *reinterpret_cast<const uint4*>(a.q + qoff[r] + c * 8);
      bf16x8_to_float(raw, q[r]);
#pragma unroll
      for (int i = 0; i < 8; ++i) q[r][i] *= a.qscale;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[r][i] = 0.f;
    }
  }
  float m[QMAX], l[QMAX], acc[QMAX][8];
#pragma unroll
  for (int r = 0; r < QMAX; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[r][i] = 0.f;
  }

  // The keys and values of the U tokens a lane takes at step `it` (zeros past t1).
  auto load = [&](int it, uint4 (&kraw)[U], uint4 (&vraw)[U], bool (&valid)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = it + u * (kWarps * S) + warp * S + sub;
      valid[u] = j < t1;
      if (valid[u]) {
        const int64_t blk = table[j >> a.block_shift];
        const int64_t e = (((blk * a.Hkv + h) << a.block_shift) + (j & bs_mask)) * D + c * 8;
        kraw[u] = __ldg(reinterpret_cast<const uint4*>(a.k_pool + e));
        vraw[u] = __ldg(reinterpret_cast<const uint4*>(a.v_pool + e));
      } else {
        kraw[u] = make_uint4(0, 0, 0, 0);
        vraw[u] = make_uint4(0, 0, 0, 0);
      }
    }
  };
  uint4 knext[U], vnext[U];
  bool vnext_ok[U];
  if constexpr (kPrefetch) load(t0, knext, vnext, vnext_ok);
  for (int it = t0; it < t1; it += kStep) {
    uint4 kraw[U], vraw[U];
    bool valid[U];
    if constexpr (kPrefetch) {
#pragma unroll
      for (int u = 0; u < U; ++u) kraw[u] = knext[u], vraw[u] = vnext[u], valid[u] = vnext_ok[u];
      if (it + kStep < t1) load(it + kStep, knext, vnext, vnext_ok);
    } else {
      load(it, kraw, vraw, valid);
    }
    float score[U][QMAX];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      bf16x8_to_float(kraw[u], kf);
#pragma unroll
      for (int r = 0; r < QMAX; ++r) {
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = fmaf(q[r][i], kf[i], s);
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        score[u][r] = valid[u] ? s : -INFINITY;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[8];
      bf16x8_to_float(vraw[u], vf);
#pragma unroll
      for (int r = 0; r < QMAX; ++r) {
        if (r >= nq || !valid[u]) continue;
        const float mn = fmaxf(m[r], score[u][r]);
        const float alpha = exp2f(m[r] - mn);  // 0 while m is -inf
        const float p = exp2f(score[u][r] - mn);
        l[r] = l[r] * alpha + p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r][i] = fmaf(p, vf[i], acc[r][i] * alpha);
        m[r] = mn;
      }
    }
  }

  // Subgroups of a warp: butterfly merge over the lane bits above the token-lane bits.
#pragma unroll
  for (int off = L; off < 32; off <<= 1) {
#pragma unroll
    for (int r = 0; r < QMAX; ++r) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[r], off), lo = __shfl_xor_sync(0xffffffffu, l[r], off);
      float acco[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) acco[i] = __shfl_xor_sync(0xffffffffu, acc[r][i], off);
      merge_state(m[r], l[r], acc[r], mo, lo, acco);
    }
  }
  if (sub == 0) {
#pragma unroll
    for (int r = 0; r < QMAX; ++r) {
#pragma unroll
      for (int i = 0; i < 8; ++i) s_acc[warp][r][c * 8 + i] = acc[r][i];
      if (lane == 0) {
        s_m[warp][r] = m[r];
        s_l[warp][r] = l[r];
      }
    }
  }
  __syncthreads();
  store_merged<D, QMAX>(a, s_acc, s_m, s_l, nq, dst, direct, part_o, part_lse);
  __syncthreads();  // the shared arrays are reused by the caller's next call
}

// Plain path: CTA ((b * Hkv + h) * nsplit + s) * qchunks + qc. Rows of a group start after the group's prefix.
template <int D, int QMAX>
__global__ void __launch_bounds__(kThreads) plain_kernel(Args a, bool direct) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  int64_t idx = blockIdx.x;
  const int qc = int(idx % a.qchunks);
  idx /= a.qchunks;
  const int s = int(idx % a.nsplit);
  idx /= a.nsplit;
  const int h = int(idx % a.Hkv);
  const int b = int(idx / a.Hkv);
  const int len = a.seq_lens[b];
  const int t0 = row_start(a, b) + s * a.chunk;
  const int t1 = min(t0 + a.chunk, len);
  const int nq = min(QMAX, a.R - qc * QMAX);
  int64_t qoff[QMAX], dst[QMAX];
#pragma unroll
  for (int r = 0; r < QMAX; ++r) {
    const int head = h * a.R + qc * QMAX + min(r, nq - 1);
    qoff[r] = (int64_t(b) * a.Hq + head) * D;
    dst[r] = direct ? int64_t(b) * a.Hq + head : (int64_t(b) * a.Hq + head) * a.nsplit + s;
  }
  attend<D, QMAX>(a, a.block_tables + int64_t(b) * a.max_blocks, t0, t1, h, qoff, dst, nq, direct, a.plain_o,
                  a.plain_lse);
}

// Prefix path: CTA ((g * Hkv + h) * nsplit_p + s) * qy + y; it takes the group's query chunks y, y + qy, ...
// (chunks of QMAX vectors; vector i is row r0 + i / R, query head h * R + i % R), all over the first row's table.
template <int D, int QMAX>
__global__ void __launch_bounds__(kThreads) prefix_kernel(Args a) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  int64_t idx = blockIdx.x;
  const int y = int(idx % a.qy);
  idx /= a.qy;
  const int s = int(idx % a.nsplit_p);
  idx /= a.nsplit_p;
  const int h = int(idx % a.Hkv);
  const int g = int(idx / a.Hkv);
  const int r0 = a.group_offsets[g], r1 = a.group_offsets[g + 1];
  const int nvec = (r1 - r0) * a.R;
  const int t0 = s * a.chunk_p;
  const int t1 = min(t0 + a.chunk_p, a.prefix_lens[g]);
  const int32_t* table = a.block_tables + int64_t(r0) * a.max_blocks;
  for (int chunk = y; chunk * QMAX < nvec; chunk += a.qy) {
    const int nq = min(QMAX, nvec - chunk * QMAX);
    int64_t qoff[QMAX], dst[QMAX];
#pragma unroll
    for (int r = 0; r < QMAX; ++r) {
      const int i = chunk * QMAX + min(r, nq - 1);
      const int row = r0 + i / a.R, head = h * a.R + i % a.R;
      qoff[r] = (int64_t(row) * a.Hq + head) * D;
      dst[r] = (int64_t(row) * a.Hq + head) * a.nsplit_p + s;
    }
    attend<D, QMAX>(a, table, t0, t1, h, qoff, dst, nq, false, a.pre_o, a.pre_lse);
  }
}

// One warp per (row, query head): merges the row's sequence splits and, for rows of a group, the prefix splits.
// Lane s % 32 holds split s's lse and weight, so the max and the denominator are warp reductions, not a chain of
// dependent loads; each lane then accumulates 4 adjacent dimensions over the splits (every supported D is a multiple
// of 4).
// Empty splits (lse -inf, weight 0) are skipped: their partial output was never written.
__global__ void combine_kernel(Args a, int D) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int64_t w = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (w >= int64_t(a.B) * a.Hq) return;
  const int b = int(w / a.Hq);
  const bool grouped = a.num_groups > 0 && b >= a.group_offsets[0] && b < a.group_offsets[a.num_groups];
  const int n1 = a.nsplit, n = n1 + (grouped ? a.nsplit_p : 0);  // n <= 2 * kMaxSplits = 4 * 32
  const float* lse1 = a.plain_lse + w * n1;
  const float* o1 = a.plain_o + w * n1 * D;
  const float* lse2 = grouped ? a.pre_lse + w * a.nsplit_p : nullptr;
  const float* o2 = grouped ? a.pre_o + w * a.nsplit_p * D : nullptr;
  constexpr int kPerLane = 2 * kMaxSplits / 32;
  float l[kPerLane];
  float M = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int s = lane + 32 * i;
    l[i] = s < n1 ? lse1[s] : s < n ? lse2[s - n1] : -INFINITY;
    M = fmaxf(M, l[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
  float e[kPerLane], den = 0.f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    e[i] = M != -INFINITY && l[i] != -INFINITY ? exp2f(l[i] - M) : 0.f;
    den += e[i];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
  const float inv = M != -INFINITY ? 1.f / den : 0.f;
  auto part = [&](int s) { return s < n1 ? o1 + int64_t(s) * D : o2 + int64_t(s - n1) * D; };
  for (int d0 = 0; d0 < D; d0 += 128) {  // every lane runs every iteration: the loop shuffles
    const int d = d0 + lane * 4;
    const bool active = d < D;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (32 * i >= n) break;
#pragma unroll 4  // independent loads of several splits in flight
      for (int j = 0; j < 32 && 32 * i + j < n; ++j) {
        const float es = __shfl_sync(0xffffffffu, e[i], j);
        if (es > 0.f && active) {
          const float4 v = *reinterpret_cast<const float4*>(part(32 * i + j) + d);
          acc.x += es * v.x, acc.y += es * v.y, acc.z += es * v.z, acc.w += es * v.w;
        }
      }
    }
    if (!active) continue;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(a.out + w * D + d);
    dst[0] = __floats2bfloat162_rn(acc.x * inv, acc.y * inv);
    dst[1] = __floats2bfloat162_rn(acc.z * inv, acc.w * inv);
  }
}

int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }
int pow2_at_least(int x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

// Splits of a sequence of up to max_len tokens when base_ctas CTAs run without splitting. Non-increasing in
// base_ctas, so the workspace bound can use the smallest base the shapes allow.
int splits_for(int64_t base_ctas, int max_len, int sm_count, int min_split_tokens = kMinSplitTokens) {
  if (max_len <= 0 || base_ctas <= 0) return 1;
  const int64_t want = 4 * int64_t(std::max(sm_count, 1));
  int64_t n = (want + base_ctas - 1) / base_ctas;
  n = std::max<int64_t>(n, ceil_div(max_len, kLongSplitTokens));
  n = std::min<int64_t>(n, std::max(1, ceil_div(max_len, min_split_tokens)));
  return int(std::clamp<int64_t>(n, 1, kMaxSplits));
}

struct Plan {
  bool mma8 = false;  // the plain path on the tensor cores (GQA 8, head dim 128)
  int qmax = 1, qchunks = 1, nsplit = 1, chunk = 1;
  int qmax_p = 1, qy = 1, nsplit_p = 1, chunk_p = 1;
  bool direct = true;
};

int query_chunk_max(int nvec) { return pow2_at_least(std::clamp(nvec, 1, 8)); }

// The plain path's query vectors a CTA: the group's, up to 4. Groups of 8 (Qwen3-30B-A3B's 32 query heads over 4 KV
// heads) ran 1.25-1.33x faster as two CTAs of 4 than as one of 8 (bench_decode_attention, H200: 8 hold twice the
// registers and halve the CTAs an SM runs; the second CTA finds the KV in L2), as the prefix path found before.
// HONE_DECODE_PLAIN_VECTORS (1, 2, 4 or 8, read once) picks another count for comparisons end to end.
int forced_plain_vectors() {
  static const int forced = [] {
    const char* e = std::getenv("HONE_DECODE_PLAIN_VECTORS");
    if (!e || !*e) return 0;
    const int v = std::atoi(e);
    HONE_CHECK(v == 1 || v == 2 || v == 4 || v == 8, "HONE_DECODE_PLAIN_VECTORS=", e, ": not 1, 2, 4 or 8");
    return v;
  }();
  return forced;
}
int plain_vectors_of(int R) { return std::min(forced_plain_vectors() > 0 ? forced_plain_vectors() : 4, query_chunk_max(R)); }

int prefix_min_split(const PagedDecodeArgs& a) {
  return a.prefix_split_tokens > 0 ? a.prefix_split_tokens : kMinSplitTokens;
}

Plan make_plan(const PagedDecodeArgs& a, int Hq, int Hkv, int D, const GpuContext& ctx) {
  Plan p;
  const int R = Hq / Hkv;
  // GQA 8 at head dim 128 runs on the tensor cores unless a count of vectors a CTA is asked for.
  p.mma8 = R == 8 && D == 128 && a.plain_vectors == 0 && forced_plain_vectors() == 0;
  p.qmax = p.mma8 ? 8 : a.plain_vectors > 0 ? std::min(a.plain_vectors, query_chunk_max(R)) : plain_vectors_of(R);
  p.qchunks = ceil_div(R, p.qmax);
  p.nsplit = splits_for(int64_t(a.B) * Hkv * p.qchunks, a.max_seq_len, ctx.sm_count);
  p.chunk = ceil_div(a.max_seq_len, p.nsplit);
  p.direct = a.num_groups == 0 && p.nsplit == 1;
  if (a.num_groups > 0) {
    const int avg_vectors = (a.max_group_rows > 0 ? a.max_group_rows : std::max(1, a.B / a.num_groups)) * R;
    // At most 4 vectors a CTA by default: 8 hold twice the registers, halve the CTAs an SM runs and were slower at
    // every shape of bench_decode_attention (H100).
    p.qmax_p = a.prefix_vectors > 0 ? a.prefix_vectors : std::min(4, query_chunk_max(avg_vectors));
    p.qy = ceil_div(avg_vectors, p.qmax_p);
    p.nsplit_p = splits_for(int64_t(a.num_groups) * Hkv * p.qy, a.max_prefix_len, ctx.sm_count, prefix_min_split(a));
    p.chunk_p = std::max(1, ceil_div(a.max_prefix_len, p.nsplit_p));
  }
  return p;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Workspace layout for split counts (nsplit, nsplit_p): plain o, plain lse, prefix o, prefix lse.
struct Layout {
  size_t plain_o = 0, plain_lse = 0, pre_o = 0, pre_lse = 0, bytes = 0;
};

Layout layout_for(int B, int Hq, int D, int nsplit, int nsplit_p, bool plain_partials, bool prefix_partials) {
  Layout l;
  const size_t rows = size_t(B) * size_t(Hq);
  size_t at = 0;
  if (plain_partials) {
    l.plain_o = at;
    at += align256(rows * size_t(nsplit) * size_t(D) * sizeof(float));
    l.plain_lse = at;
    at += align256(rows * size_t(nsplit) * sizeof(float));
  }
  if (prefix_partials) {
    l.pre_o = at;
    at += align256(rows * size_t(nsplit_p) * size_t(D) * sizeof(float));
    l.pre_lse = at;
    at += align256(rows * size_t(nsplit_p) * sizeof(float));
  }
  l.bytes = at;
  return l;
}

void check_args(const PagedDecodeArgs& a, int Hq, int Hkv, int D) {
  HONE_CHECK(D == 16 || D == 32 || D == 64 || D == 128, "paged decode attention supports head dim 16, 32, 64 and 128, got ", D);
  HONE_CHECK(Hkv > 0 && Hq > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(a.block_size >= 8 && a.block_size <= 256 && (a.block_size & (a.block_size - 1)) == 0,
             "KV block size must be a power of two in [8, 256], got ", a.block_size);
  HONE_CHECK(a.B >= 0 && a.max_blocks > 0 && a.max_seq_len >= 1, "bad paged decode shape B=", a.B,
             " max_blocks=", a.max_blocks, " max_seq_len=", a.max_seq_len);
  HONE_CHECK(int64_t(a.max_seq_len) <= int64_t(a.max_blocks) * a.block_size, "max_seq_len ", a.max_seq_len,
             " exceeds the block table's ", a.max_blocks, " x ", a.block_size, " tokens");
  HONE_CHECK(a.num_groups >= 0, "negative group count ", a.num_groups);
  if (a.num_groups > 0)
    HONE_CHECK(a.group_offsets && a.prefix_lens && a.max_prefix_len >= 0 && a.max_prefix_len <= a.max_seq_len,
               "shared-prefix groups need group_offsets, prefix_lens and max_prefix_len in [0, max_seq_len], got ",
               a.max_prefix_len);
  HONE_CHECK(a.prefix_vectors == 0 || a.prefix_vectors == 1 || a.prefix_vectors == 2 || a.prefix_vectors == 4 ||
                 a.prefix_vectors == 8,
             "prefix_vectors must be 0, 1, 2, 4 or 8, got ", a.prefix_vectors);
  HONE_CHECK(a.plain_vectors == 0 || a.plain_vectors == 1 || a.plain_vectors == 2 || a.plain_vectors == 4 ||
                 a.plain_vectors == 8,
             "plain_vectors must be 0, 1, 2, 4 or 8, got ", a.plain_vectors);
  HONE_CHECK(a.max_group_rows >= 0, "negative max_group_rows ", a.max_group_rows);
  HONE_CHECK(a.prefix_split_tokens == 0 || a.prefix_split_tokens >= 16, "prefix_split_tokens must be 0 or >= 16, got ",
             a.prefix_split_tokens);
}

template <int D>
void launch(const Args& args, const Plan& p, const PagedDecodeArgs& a, const GpuContext& ctx) {
  const unsigned plain_ctas = unsigned(int64_t(a.B) * args.Hkv * p.nsplit * p.qchunks);
  bool launched = false;
  if constexpr (D == 128) {
    if (p.mma8) {
      paged::launch_plain_mma8(args, plain_ctas, p.direct, ctx.stream);
      launched = true;
    }
  }
  if (!launched) switch (p.qmax) {
    case 1:
      launch_dependent(plain_kernel<D, 1>, dim3(plain_ctas), dim3(kThreads), 0, ctx.stream, args, p.direct);
      break;
    case 2:
      launch_dependent(plain_kernel<D, 2>, dim3(plain_ctas), dim3(kThreads), 0, ctx.stream, args, p.direct);
      break;
    case 4:
      launch_dependent(plain_kernel<D, 4>, dim3(plain_ctas), dim3(kThreads), 0, ctx.stream, args, p.direct);
      break;
    default:
      launch_dependent(plain_kernel<D, 8>, dim3(plain_ctas), dim3(kThreads), 0, ctx.stream, args, p.direct);
      break;
  }
  CUDA_CHECK_LAST();
  if (a.num_groups > 0) {
    const unsigned prefix_ctas = unsigned(int64_t(a.num_groups) * args.Hkv * p.nsplit_p * p.qy);
    switch (p.qmax_p) {
      case 1:
        launch_dependent(prefix_kernel<D, 1>, dim3(prefix_ctas), dim3(kThreads), 0, ctx.stream, args);
        break;
      case 2:
        launch_dependent(prefix_kernel<D, 2>, dim3(prefix_ctas), dim3(kThreads), 0, ctx.stream, args);
        break;
      case 4:
        launch_dependent(prefix_kernel<D, 4>, dim3(prefix_ctas), dim3(kThreads), 0, ctx.stream, args);
        break;
      default:
        launch_dependent(prefix_kernel<D, 8>, dim3(prefix_ctas), dim3(kThreads), 0, ctx.stream, args);
        break;
    }
    CUDA_CHECK_LAST();
  }
  if (!p.direct) {
    HONE_CHECK(reinterpret_cast<uintptr_t>(args.out) % 8 == 0, "paged decode attention output not 8-byte aligned");
    launch_dependent(combine_kernel, dim3(unsigned(ceil_div(int64_t(a.B) * args.Hq, kWarps))), dim3(kThreads), 0,
                     ctx.stream, args, D);
    CUDA_CHECK_LAST();
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

size_t paged_attention_decode_workspace(const PagedDecodeArgs& a, int Hq, int D, const GpuContext& ctx) {
  // Hkv >= 1 and at least one query chunk: the smallest CTA counts, hence the most splits any Hkv can get.
  const int nsplit = splits_for(int64_t(a.B) * ceil_div(Hq, 8), a.max_seq_len, ctx.sm_count);
  const int nsplit_p =
      a.num_groups > 0 ? splits_for(a.num_groups, a.max_prefix_len, ctx.sm_count, prefix_min_split(a)) : 1;
  const bool plain_partials = a.num_groups > 0 || nsplit > 1;
  return layout_for(a.B, Hq, D, nsplit, nsplit_p, plain_partials, a.num_groups > 0).bytes;
}

void paged_attention_decode_forward(bf16* out, const bf16* q, const bf16* k_pool, const bf16* v_pool,
                                    const PagedDecodeArgs& a, int Hq, int Hkv, int D, float scale,
                                    const GpuContext& ctx) {
  check_args(a, Hq, Hkv, D);
  if (a.B == 0) return;
  HONE_CHECK(aligned16(q) && aligned16(k_pool) && aligned16(v_pool), "paged decode attention needs 16-byte aligned q "
             "and KV pools");
  const Plan p = make_plan(a, Hq, Hkv, D, ctx);
  Args args{};
  args.q = q;
  args.k_pool = k_pool;
  args.v_pool = v_pool;
  args.block_tables = a.block_tables;
  args.seq_lens = a.seq_lens;
  args.B = a.B;
  args.max_blocks = a.max_blocks;
  int shift = 0;
  while ((1 << shift) < a.block_size) ++shift;
  args.block_shift = shift;
  args.Hq = Hq;
  args.Hkv = Hkv;
  args.R = Hq / Hkv;
  args.qscale = scale * kLog2e;
  args.nsplit = p.nsplit;
  args.chunk = p.chunk;
  args.qchunks = p.qchunks;
  args.num_groups = a.num_groups;
  args.group_offsets = a.group_offsets;
  args.prefix_lens = a.prefix_lens;
  args.nsplit_p = p.nsplit_p;
  args.chunk_p = p.chunk_p;
  args.qy = p.qy;
  args.out = out;
  if (!p.direct) {
    const Layout l = layout_for(a.B, Hq, D, p.nsplit, p.nsplit_p, true, a.num_groups > 0);
    HONE_CHECK(l.bytes <= paged_attention_decode_workspace(a, Hq, D, ctx), "paged decode plan exceeds its workspace");
    char* base = static_cast<char*>(kernel_scratch(ctx, paged_attention_decode_workspace(a, Hq, D, ctx)));
    args.plain_o = reinterpret_cast<float*>(base + l.plain_o);
    args.plain_lse = reinterpret_cast<float*>(base + l.plain_lse);
    if (a.num_groups > 0) {
      args.pre_o = reinterpret_cast<float*>(base + l.pre_o);
      args.pre_lse = reinterpret_cast<float*>(base + l.pre_lse);
    }
  }
  if (D == 16) launch<16>(args, p, a, ctx);
  else if (D == 32) launch<32>(args, p, a, ctx);
  else if (D == 64) launch<64>(args, p, a, ctx);
  else launch<128>(args, p, a, ctx);
}

}  // namespace hone::cuda
