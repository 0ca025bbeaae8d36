// The fused token sampler and the stop check of the generation engine (cuda/generation_ops.h). One CTA of 1024
// threads per row, the rules of src/generation/sampler.h in the same order, without sorting the vocabulary:
//   1. one read of the row (float4 loads where 16-byte aligned): max and argmax (lowest id on ties) and the mass
//      sum w of each of 32 segments (one per warp), kept relative to the warp's running max, rescaled in double when
//      it grows and at the end to the row max; their sum is the full vocabulary's mass. Greedy stops here.
//   2. top-k: radix select of the k-th largest logit on an order-preserving uint32 key (12, 12 and 8-bit digits, a
//      read each); keys >= it are kept, so ties at the boundary are all kept as on the CPU. Once the keys at or
//      above a level's bin fit 4096 slots (usually at once), a read gathers them and steps 2-5 finish in shared
//      memory (cuda/sampler_topk.cuh); otherwise the exact k-th key goes on to steps 3-5 below.
//   3. top-p: radix select on the same key of the largest logit theta whose tail mass sum_{x >= theta} w (over the
//      top-k survivors) reaches p * (their mass), with mass histograms in double; every token tied with it is kept
//      (cuda/sampler_topp.cuh).
//   4. min-p: keep w >= min_p (w = exp((x - max) / T) is the probability relative to the most probable token).
//   5. draw: u = philox_uniform(seed, step, sample, position); the first kept token, in ascending id order, whose
//      running kept mass exceeds u * (kept mass), found in three levels: 32 segment sums, 32 sub-segment sums of
//      the chosen segment, and a warp scan over the chosen sub-segment. Without filters the segment sums are step
//      1's (the row is read 1 + 1/32 times); with filters a pass over the kept weights gives them. Every pass over
//      the whole row reads as step 1 does (warp w over segment w, float4 loads).
// Weights are fp32 expf of (x - max) / T, sums in double; the CPU decides in double, so the two can differ only when
// u * mass lands within ~1e-7 relative of a token boundary. logprob = (x_tok - max) / T - log(sum of all w) in double.
// Step 1's masses add expf((x - m) / T) * exp((m - max) / T), m in [x, max] the warp's max when x was read, the
// second factor in double: a term is as close to the CPU's double weight as expf((x - max) / T) is (|x - m| <=
// |x - max|: its fp32 argument rounds no more) and the rescaling adds ~1e-16. They decide only the segment and
// u * mass (and the logprob's sum); inside the segment the draw recomputes expf((x - max) / T), so a token boundary
// moves by the same kind of per-weight fp32 error as before and the ~1e-7 above still bounds it. When rounding puts
// u * mass past the segment's recomputed mass, the segment's last kept token is drawn (that boundary case). When the
// recomputed mass is 0 (step 1's came from weights below fp32's range relative to the row max: possible only at
// u = 0), the draw starts again from exact segment sums, as with filters.
// A NaN logit is never drawn (weight 0, lowest key); a row whose max is not finite (no finite logit, or +inf) gives
// its argmax and a NaN logprob.
#include <cstdint>

#include "cuda/check.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/generation_ops.h"
#include "ops/philox.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kNone = 0x7fffffff;  // argmax index before any non-NaN logit

struct RowParams {
  float inv_t;
  double inv_t_d;
  int top_k;
  float top_p;
  float min_p;
  bool greedy;
};

__device__ __forceinline__ uint32_t order_key(float x) {
  if (x != x) return 0u;
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float weight_of(float x, float xmax, float inv_t) {
  return x == x ? expf((x - xmax) * inv_t) : 0.f;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const T o = __shfl_up_sync(kFull, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

// Sum over the block in a fixed order (warps, then warp 0 over the per-warp sums): every thread gets the result.
__device__ double block_sum(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double t = lane < kWarps ? shared[lane] : 0.0;
  t = warp_sum(t);
  return t;
}

// Adds `value` to hist[bin] for lanes with `active`; a warp whose active lanes share one bin adds once.
template <typename T>
__device__ __forceinline__ void hist_add(T* hist, bool active, int bin, T value) {
  const unsigned act = __ballot_sync(kFull, active);
  if (act == 0) return;
  const int first = __ffs(act) - 1;
  const int bin0 = __shfl_sync(kFull, bin, first);
  if (__all_sync(kFull, !active || bin == bin0)) {
    const T s = warp_sum(active ? value : T(0));
    if ((threadIdx.x & 31) == first) atomicAdd(&hist[bin0], s);
  } else if (active) {
    atomicAdd(&hist[bin], value);
  }
}

// The 32 segments of a row, one per warp in the fused pass: `head` elements up to the row's first 16-byte boundary
// belong to segment 0, then segment s starts at head + s * len with len a multiple of 4, so every segment's body is
// read with aligned float4 loads whatever ld and the row's address are (the head and the last 1-3 ids are scalar).
struct Segments {
  int head, len, V;
  __device__ Segments(const float* x, int V_) : V(V_) {
    const int misaligned = int((reinterpret_cast<uintptr_t>(x) >> 2) & 3u);
    head = min(V, (4 - misaligned) & 3);
    len = ((V - head + kWarps - 1) / kWarps + 3) & ~3;
  }
  __device__ int begin(int s) const { return s == 0 ? 0 : min(V, head + s * len); }
};

// Calls f(v, id, valid) for every id of the row once, in the fused pass's layout (warp w reads segment w, its body as
// float4 with kUnroll loads in flight per lane). The lanes of a warp call f together (invalid lanes with valid =
// false), so f may use warp collectives; it must not synchronize the block.
template <int kUnroll, typename F>
__device__ __forceinline__ void visit_row(const float* x, const Segments& seg, F&& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int a = seg.begin(warp), b = seg.begin(warp + 1);
  const int va = max(a, seg.head);
  const int n4 = (b - va) >> 2;
  if (warp == 0 && seg.head > 0) f(lane < seg.head ? x[lane] : 0.f, lane, lane < seg.head);
  const float4* p4 = reinterpret_cast<const float4*>(x + va);
  for (int base = 0; base < n4; base += 32 * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = base + u * 32 + lane;
      v[u] = q < n4 ? __ldg(p4 + q) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = base + u * 32 + lane;
      const int id = va + 4 * q;
      f(v[u].x, id, q < n4);
      f(v[u].y, id + 1, q < n4);
      f(v[u].z, id + 2, q < n4);
      f(v[u].w, id + 3, q < n4);
    }
  }
  const int t0 = va + 4 * n4;  // fewer than 4 ids after the body (the row's last segment only)
  if (t0 < b) f(t0 + lane < b ? x[t0 + lane] : 0.f, t0 + lane, t0 + lane < b);
}

#include "cuda/sampler_topp.cuh"

struct Keep {
  uint32_t key_floor;
  float min_p;
  float xmax, inv_t;
  __device__ float operator()(float x) const {  // the weight if kept, else 0
    if (order_key(x) < key_floor) return 0.f;
    const float w = weight_of(x, xmax, inv_t);
    return w >= min_p ? w : 0.f;
  }
};

__device__ __forceinline__ void argmax_add(float v, int i, float& best, int& best_i) {
  if (v > best || (best_i == kNone && v == v)) {  // ids come in increasing order: the first of equal values stays
    best = v;
    best_i = i;
  }
}

__device__ __forceinline__ void argmax_merge(float ob, int oi, float& best, int& best_i) {
  if (ob > best || (ob == best && oi < best_i)) {
    best = ob;
    best_i = oi;
  }
}

// One lane's state in the fused pass. m is the same in every lane of the warp (the largest logit the warp has seen,
// -inf before any), so raising it is a uniform branch, taken about log(iterations) times per row.
struct Online {
  float m = -INFINITY;
  double s = 0.0;  // this lane's sum of expf((x - m) * inv_t) over its non-NaN logits, rescaled when m grows
  float best = -INFINITY;
  int best_i = kNone;
};

// Adds N logits of this lane (ids id0 + (j / 4) * 128 + j % 4; NaN where the lane has none) to its state.
template <int N>
__device__ __forceinline__ void online_add(Online& o, const float (&v)[N], int id0, float inv_t, double inv_t_d) {
  float cm = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j) cm = fmaxf(cm, v[j]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(kFull, cm, off));
  if (cm > o.m) {  // the factor in double: no rounding of its own reaches the segment masses
    o.s *= exp((double(o.m) - double(cm)) * inv_t_d);
    o.m = cm;
  }
  if (o.m > -INFINITY) {  // else every logit so far is -inf or NaN (weight 0), and x - m would be NaN for -inf
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (v[j] == v[j]) o.s += double(expf((v[j] - o.m) * inv_t));
  }
#pragma unroll
  for (int j = 0; j < N; ++j) argmax_add(v[j], id0 + (j >> 2) * 128 + (j & 3), o.best, o.best_i);
}

// 1. The fused pass, one read of the row: warp w reads segment w (head and tail scalar, the body as float4, kUnroll
// loads in flight per lane) and keeps its max and argmax and its mass relative to its own max. Warp 0 then gives:
// s_best[0], s_best_i[0] the row's max and argmax (lowest id on ties, 0 for a row of NaN); s_seg[w] the mass of
// segment w relative to the row max; *total their sum in segment order. Every thread returns once they are written.
template <int kUnroll>
__device__ void fused_pass(const float* x, int V, const Segments& seg, float inv_t, double inv_t_d, float* s_best,
                           int* s_best_i, float* s_seg_m, double* s_seg, double* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int a = seg.begin(warp), b = seg.begin(warp + 1);
  const int va = max(a, seg.head);  // the body: 16-byte aligned
  const int n4 = (b - va) >> 2;
  Online o;
  if (warp == 0 && seg.head > 0) {
    const float v[1] = {lane < seg.head ? x[lane] : NAN};
    online_add(o, v, lane, inv_t, inv_t_d);
  }
  const float4* p4 = reinterpret_cast<const float4*>(x + va);
  for (int base = 0; base < n4; base += 32 * kUnroll) {
    float v[4 * kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = base + u * 32 + lane;
      const float4 f = q < n4 ? __ldg(p4 + q) : make_float4(NAN, NAN, NAN, NAN);
      v[4 * u] = f.x;
      v[4 * u + 1] = f.y;
      v[4 * u + 2] = f.z;
      v[4 * u + 3] = f.w;
    }
    online_add(o, v, va + 4 * (base + lane), inv_t, inv_t_d);
  }
  const int t0 = va + 4 * n4;  // fewer than 4 ids after the body (the row's last segment only)
  if (t0 < b) {
    const float v[1] = {t0 + lane < b ? x[t0 + lane] : NAN};
    online_add(o, v, t0 + lane, inv_t, inv_t_d);
  }
  const double s = warp_sum(o.s);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    argmax_merge(__shfl_xor_sync(kFull, o.best, off), __shfl_xor_sync(kFull, o.best_i, off), o.best, o.best_i);
  if (lane == 0) {
    s_best[warp] = o.best;
    s_best_i[warp] = o.best_i;
    s_seg_m[warp] = o.m;
    s_seg[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    float best = s_best[lane];
    int best_i = s_best_i[lane];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      argmax_merge(__shfl_xor_sync(kFull, best, off), __shfl_xor_sync(kFull, best_i, off), best, best_i);
    const float m = s_seg_m[lane];  // a segment of -inf and NaN only (or empty) holds no mass
    s_seg[lane] = m > -INFINITY ? s_seg[lane] * exp((double(m) - double(best)) * inv_t_d) : 0.0;
    __syncwarp();
    if (lane == 0) {
      s_best[0] = best;
      s_best_i[0] = best_i == kNone ? 0 : best_i;
      double t = 0.0;
      for (int w = 0; w < kWarps; ++w) t += s_seg[w];
      *total = t;
    }
  }
  __syncthreads();
}

// Sums kept weights of 32 consecutive pieces of [lo, hi), one per warp, into piece[].
__device__ void piece_sums(const float* x, int lo, int hi, const Keep& keep, double* piece) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int len = (hi - lo + kWarps - 1) / kWarps;
  const int a = min(hi, lo + warp * len), b = min(hi, a + len);
  double s = 0.0;
  for (int i = a + lane; i < b; i += 32) s += keep(x[i]);
  s = warp_sum(s);
  if (lane == 0) piece[warp] = s;
}

// Sums the kept weights of segment w of the row into piece[w], one warp each.
__device__ void segment_sums(const float* x, const Segments& seg, const Keep& keep, double* piece) {
  double s = 0.0;
  visit_row<4>(x, seg, [&](float v, int, bool valid) { s += valid ? keep(v) : 0.f; });
  s = warp_sum(s);
  if ((threadIdx.x & 31) == 0) piece[threadIdx.x >> 5] = s;
}

// Thread 0: the first piece whose running sum exceeds *residual (then *residual becomes the remainder inside it),
// or the last nonzero piece with *residual = +inf (rounding: the draw ends on the last kept token).
__device__ int pick_piece(const double* piece, double* residual) {
  double acc = 0.0;
  int last = -1;
  for (int p = 0; p < kWarps; ++p) {
    if (piece[p] <= 0.0) continue;
    last = p;
    if (acc + piece[p] > *residual) {
      *residual -= acc;
      return p;
    }
    acc += piece[p];
  }
  *residual = INFINITY;
  return last;
}

#include "cuda/sampler_topk.cuh"

// Thread 0: the row's token and its logprob over the full vocabulary (total: the fused pass's mass).
__device__ __forceinline__ void write_row(int32_t* tokens, float* logprobs, const float* x, int row, int token,
                                          float xmax, double inv_t_d, double total) {
  if (threadIdx.x == 0) {
    tokens[row] = token;
    logprobs[row] = float(double(x[token]) * inv_t_d - double(xmax) * inv_t_d - log(total));
  }
}

// kFilters: top-k, top-p or min-p is on (their selects and an exact first level of the draw; no minimum of CTAs per
// SM: 64 registers, 36 KB of shared memory (mostly the top-k candidates), one CTA, 4 float4 loads in flight per
// lane). Otherwise greedy or the plain draw, which takes its first level from the fused pass: 32 registers, so two
// CTAs share an SM and one's draw overlaps the other's read.
template <bool kFilters>
__global__ void __launch_bounds__(kThreads, kFilters ? 0 : 2)
    sample_kernel(int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int V, RowParams p, uint64_t seed,
                  uint32_t step, const int32_t* sample_index, const int32_t* position) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  __shared__ double s_red[kWarps];
  __shared__ double s_piece[kWarps], s_seg[kWarps];
  __shared__ double s_hist_d[256];
  __shared__ float s_best[kWarps], s_seg_m[kWarps];
  __shared__ int s_best_i[kWarps];
  __shared__ int s_bin, s_piece_pick, s_token;
  __shared__ double s_above_d, s_residual, s_total;
  __shared__ bool s_reached;

  const int row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* x = logits + int64_t(row) * ld;
  const Segments seg(x, V);

  fused_pass<kFilters ? 4 : 2>(x, V, seg, p.inv_t, p.inv_t_d, s_best, s_best_i, s_seg_m, s_seg, &s_total);
  const float xmax = s_best[0];
  const int argmax = s_best_i[0];
  const double total = s_total;
  if (!(xmax > -INFINITY && xmax < INFINITY)) {  // no finite logit, or +inf: no distribution to draw from
    if (threadIdx.x == 0) {
      tokens[row] = argmax;
      logprobs[row] = NAN;
    }
    return;
  }

  int token = argmax;
  if (!p.greedy) {
    Keep keep{0u, 0.f, xmax, p.inv_t};
    if constexpr (kFilters) {
      // 2-4. filters, as a key floor and the min-p weight floor; with top-k on, in shared memory when its candidates
      // fit (cuda/sampler_topk.cuh), else its exact k-th key is the floor.
      uint32_t floor_key = 0u;
      if (p.top_k > 0 && p.top_k < V &&
          sample_topk_candidates(x, seg, p, xmax, seed, step, uint32_t(sample_index[row]), uint32_t(position[row]),
                                 &token, &floor_key)) {
        write_row(tokens, logprobs, x, row, token, xmax, p.inv_t_d, total);
        return;
      }
      if (p.top_p < 1.f) {
        double m = 0.0;
        visit_row<4>(x, seg, [&](float v, int, bool valid) {
          if (valid && order_key(v) >= floor_key) m += weight_of(v, xmax, p.inv_t);
        });
        m = block_sum(m, s_red);
        const double target = double(p.top_p) * m;
        floor_key =
            select_mass_key(x, seg, floor_key, target, xmax, p.inv_t, s_hist_d, &s_bin, &s_above_d, &s_reached);
      }
      keep = Keep{floor_key, p.min_p > 0.f ? p.min_p : 0.f, xmax, p.inv_t};
    }

    // 5. draw: the segment, the sub-segment, a warp scan. The first level comes from the fused pass without filters
    // (exact = false) and from a pass over the kept weights with them; when a fused-pass segment turns out to hold
    // no kept weight (see the header), the draw starts again with the exact first level.
    bool exact = kFilters;
    for (;;) {
      int lo = 0, hi = V;
      if (exact) {  // with filters per segment (float4 reads); the plain restart in equal pieces (32 registers)
        if constexpr (kFilters)
          segment_sums(x, seg, keep, s_piece);
        else
          piece_sums(x, 0, V, keep, s_piece);
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        double kept = total;
        if (exact) {
          kept = 0.0;
          for (int w = 0; w < kWarps; ++w) kept += s_piece[w];
        }
        const float u =
            philox_uniform(seed, step, uint32_t(sample_index[row]), uint32_t(position[row]), kStreamToken);
        double residual = double(u) * kept;
        s_piece_pick = pick_piece(exact ? s_piece : s_seg, &residual);
        s_residual = residual;
      }
      __syncthreads();
      const int pick = s_piece_pick;
      if (pick >= 0) {
        const int len = (V + kWarps - 1) / kWarps;
        const bool equal = exact && !kFilters;
        lo = equal ? min(V, pick * len) : seg.begin(pick);
        hi = equal ? min(V, lo + len) : seg.begin(pick + 1);
      }
      __syncthreads();
      piece_sums(x, lo, hi, keep, s_piece);
      __syncthreads();
      if (threadIdx.x == 0) {
        double residual = s_residual;
        s_piece_pick = pick_piece(s_piece, &residual);
        s_residual = residual;
        s_token = -1;
      }
      __syncthreads();
      const int sub_len = (hi - lo + kWarps - 1) / kWarps;
      const int a = min(hi, lo + max(s_piece_pick, 0) * sub_len), b = min(hi, a + sub_len);
      if (warp == 0 && s_piece_pick >= 0) {
        const double residual = s_residual;
        double carry = 0.0;
        int last = -1;
        int found = -1;
        for (int base = a; base < b && found < 0; base += 32) {
          const int i = base + lane;
          const double w = i < b ? double(keep(x[i])) : 0.0;
          const double run = carry + warp_inclusive_scan(w, lane);
          const unsigned hit = __ballot_sync(kFull, w > 0.0 && run > residual);
          const unsigned nz = __ballot_sync(kFull, w > 0.0);
          if (nz) last = base + 31 - __clz(nz);
          if (hit) found = base + __ffs(hit) - 1;
          carry = __shfl_sync(kFull, run, 31);
        }
        if (lane == 0) s_token = found >= 0 ? found : last;
      }
      __syncthreads();
      const int t = s_token;
      if (t >= 0 || exact) {
        if (t >= 0) token = t;  // else (no kept mass anywhere: impossible, the max is kept) the argmax
        break;
      }
      exact = true;
      __syncthreads();
    }
  }
  write_row(tokens, logprobs, x, row, token, xmax, p.inv_t_d, total);
}

__global__ void check_stops_kernel(int32_t* done, const int32_t* tokens, const int32_t* gen_len,
                                   const int32_t* seq_len, const int32_t* max_new, int max_total,
                                   const int32_t* stop_ids, int n_stop, int B) {
  dependent_wait();  // may start before the grid before it ends (cuda/dependent_launch.cuh)
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= B) return;
  const int32_t t = tokens[b];
  int32_t r = 0;
  for (int i = 0; i < n_stop; ++i)
    if (stop_ids[i] == t) r = 1;
  if (r == 0 && (gen_len[b] + 1 >= max_new[b] || seq_len[b] + 1 >= max_total)) r = 2;
  done[b] = r;
}

}  // namespace

void sample_tokens(int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B, int V,
                   const GpuSamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                   const int32_t* position, const GpuContext& ctx) {
  HONE_CHECK(B >= 0 && V > 0 && ld >= V, "bad sampler shape B=", B, " V=", V, " ld=", ld);
  HONE_CHECK(p.greedy || (p.temperature > 0.f && p.temperature < INFINITY), "sampler temperature must be > 0, got ",
             p.temperature);
  HONE_CHECK(p.top_k >= 0 && p.top_p > 0.f && p.top_p <= 1.f && p.min_p >= 0.f && p.min_p <= 1.f,
             "bad sampler filters top_k=", p.top_k, " top_p=", p.top_p, " min_p=", p.min_p);
  if (B == 0) return;
  RowParams rp;
  const float t = p.temperature > 0.f ? p.temperature : 1.f;
  rp.inv_t = 1.f / t;
  rp.inv_t_d = 1.0 / double(t);
  rp.top_k = p.top_k;
  rp.top_p = p.top_p;
  rp.min_p = p.min_p;
  rp.greedy = p.greedy;
  const bool filters = !p.greedy && ((p.top_k > 0 && p.top_k < V) || p.top_p < 1.f || p.min_p > 0.f);
  if (filters)
    launch_dependent(sample_kernel<true>, dim3(unsigned(B)), dim3(kThreads), 0, ctx.stream, tokens, logprobs, logits,
                     ld, V, rp, seed, step, sample_index, position);
  else
    launch_dependent(sample_kernel<false>, dim3(unsigned(B)), dim3(kThreads), 0, ctx.stream, tokens, logprobs, logits,
                     ld, V, rp, seed, step, sample_index, position);
  CUDA_CHECK_LAST();
}

void check_stops(int32_t* done, const int32_t* tokens, const int32_t* gen_len, const int32_t* seq_len,
                 const int32_t* max_new, int max_total, const int32_t* stop_ids, int n_stop, int B,
                 const GpuContext& ctx) {
  HONE_CHECK(B >= 0 && n_stop >= 0, "bad check_stops shape B=", B, " n_stop=", n_stop);
  if (B == 0) return;
  launch_dependent(check_stops_kernel, dim3(unsigned((B + 255) / 256)), dim3(256), 0, ctx.stream, done, tokens, gen_len,
                   seq_len, max_new, max_total, stop_ids, n_stop, B);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
