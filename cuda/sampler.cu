// The fused token sampler and the stop check of the generation engine (cuda/generation_ops.h). One CTA of 1024
// threads per row, the rules of src/generation/sampler.h in the same order, without sorting the vocabulary:
//   1. max and argmax (lowest id on ties) of the logits; greedy stops here (plus the sum for its logprob).
//   2. top-k: radix select (4 passes of 8-bit digits) of the k-th largest logit on an order-preserving uint32 key;
//      everything >= it is kept, so ties at the boundary are all kept as on the CPU.
//   3. top-p: radix select on the same key of the largest logit theta whose tail mass sum_{x >= theta} w (over the
//      top-k survivors) reaches p * (their mass), with mass histograms in double; every token tied with it is kept.
//   4. min-p: keep w >= min_p (w = exp((x - max) / T) is the probability relative to the most probable token).
//   5. draw: u = philox_uniform(seed, step, sample, position); the first kept token, in ascending id order, whose
//      running kept mass exceeds u * (kept mass), found in three levels: 32 segment sums (one per warp), 32
//      sub-segment sums of the chosen segment, and a warp scan over the chosen sub-segment.
// Weights are fp32 expf of (x - max) / T, sums in double; the CPU decides in double, so the two can differ only when
// u * mass lands within ~1e-7 relative of a token boundary. logprob = (x_tok - max) / T - log(sum of all w) in double.
// A NaN logit is never drawn (weight 0, lowest key); a row without any finite logit gives its argmax and a NaN logprob.
#include <cstdint>

#include "cuda/check.h"
#include "cuda/generation_ops.h"
#include "ops/philox.h"

namespace hone::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

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

// Warp 0: the highest bin b with sum_{b' >= b} hist[b'] >= need; *above = sum_{b' > b} hist[b']. *reached is false
// when the total is below need; the lowest nonzero bin is returned then. When the scan crosses need inside a lane
// but that lane's serial sum stops short (rounding of double sums), its lowest nonzero bin is returned.
template <typename T>
__device__ int select_bin_desc(const T* hist, T need, T* above, bool* reached) {
  const int lane = threadIdx.x & 31;
  const int hi = 255 - 8 * lane;  // lane 0 holds the highest bins
  T s = T(0);
#pragma unroll
  for (int j = 0; j < 8; ++j) s += hist[hi - j];
  const T incl = warp_inclusive_scan(s, lane);
  T excl = __shfl_up_sync(kFull, incl, 1);  // the previous lane's inclusive sum: below need whenever it did not hit
  if (lane == 0) excl = T(0);
  const unsigned hit = __ballot_sync(kFull, incl >= need && s > T(0));
  int bin = -1;
  T ab = T(0);
  bool ok = false;
  const unsigned nonzero = __ballot_sync(kFull, s > T(0));
  const int lane_pick = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
  if (lane == lane_pick) {
    T cum = excl;
    int low_nonzero = -1;
    T cum_before_low = T(0);
    for (int j = 0; j < 8; ++j) {
      const T h = hist[hi - j];
      if (h > T(0)) {
        low_nonzero = hi - j;
        cum_before_low = cum;
      }
      const T before = cum;
      cum += h;
      if (hit && h > T(0) && cum >= need) {
        bin = hi - j;
        ab = before;
        ok = true;
        break;
      }
    }
    if (!ok) {
      bin = low_nonzero;
      ab = cum_before_low;
    }
  }
  const int src = lane_pick < 0 ? 0 : lane_pick;
  bin = __shfl_sync(kFull, bin, src);
  ab = __shfl_sync(kFull, ab, src);
  *above = ab;
  *reached = hit != 0;  // the scan reached `need` (a miss inside the lane is rounding, not a short total)
  return bin;
}

// The key of the k-th largest logit (1 <= k <= V).
__device__ uint32_t select_kth_key(const float* x, int V, int k, unsigned* hist, int* s_bin, unsigned* s_above) {
  uint32_t prefix = 0, mask = 0;
  unsigned need = unsigned(k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0u;
    __syncthreads();
    for (int base = 0; base < V; base += kThreads) {
      const int i = base + threadIdx.x;
      const uint32_t key = i < V ? order_key(x[i]) : 0u;
      hist_add<unsigned>(hist, i < V && (key & mask) == prefix, int((key >> shift) & 255u), 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      unsigned above = 0;
      bool reached = false;
      const int bin = select_bin_desc<unsigned>(hist, need, &above, &reached);
      if (threadIdx.x == 0) {
        *s_bin = bin < 0 ? 0 : bin;
        *s_above = above;
      }
    }
    __syncthreads();
    need -= *s_above;
    prefix |= uint32_t(*s_bin) << shift;
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

// The key theta of the largest logit among candidates (key >= floor_key) with sum_{key >= theta} w >= target;
// floor_key (keep every candidate) when the candidates' mass is below the target.
__device__ uint32_t select_mass_key(const float* x, int V, uint32_t floor_key, double target, float xmax,
                                    float inv_t, double* hist, int* s_bin, double* s_above, bool* s_reached) {
  uint32_t prefix = 0, mask = 0;
  double need = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0.0;
    __syncthreads();
    for (int base = 0; base < V; base += kThreads) {
      const int i = base + threadIdx.x;
      const float xi = i < V ? x[i] : 0.f;
      const uint32_t key = i < V ? order_key(xi) : 0u;
      const bool active = i < V && key >= floor_key && (key & mask) == prefix;
      hist_add<double>(hist, active, int((key >> shift) & 255u), active ? double(weight_of(xi, xmax, inv_t)) : 0.0);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      double above = 0;
      bool reached = false;
      const int bin = select_bin_desc<double>(hist, need, &above, &reached);
      if (threadIdx.x == 0) {
        *s_bin = bin;
        *s_above = above;
        *s_reached = reached;
      }
    }
    __syncthreads();
    const int bin = *s_bin;
    const bool reached = *s_reached;
    const double above = *s_above;
    __syncthreads();
    if (bin < 0 || (shift == 24 && !reached)) return floor_key;  // the whole candidate mass is below the target
    need -= above;
    prefix |= uint32_t(bin) << shift;
    mask |= 255u << shift;
  }
  return prefix > floor_key ? prefix : floor_key;
}

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

// Sums kept weights of 32 consecutive pieces of [lo, hi), one per warp, into piece[]; returns nothing.
__device__ void piece_sums(const float* x, int lo, int hi, const Keep& keep, double* piece, double* total_out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int len = (hi - lo + kWarps - 1) / kWarps;
  const int a = min(hi, lo + warp * len), b = min(hi, a + len);
  double s = 0.0, t = 0.0;
  for (int i = a + lane; i < b; i += 32) {
    const float xi = x[i];
    s += keep(xi);
    if (total_out) t += weight_of(xi, keep.xmax, keep.inv_t);
  }
  s = warp_sum(s);
  if (total_out) t = warp_sum(t);
  if (lane == 0) {
    piece[warp] = s;
    if (total_out) total_out[warp] = t;
  }
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

__global__ void __launch_bounds__(kThreads) sample_kernel(int32_t* tokens, float* logprobs, const float* logits,
                                                          int64_t ld, int V, RowParams p, uint64_t seed,
                                                          uint32_t step, const int32_t* sample_index,
                                                          const int32_t* position) {
  __shared__ double s_red[kWarps];
  __shared__ double s_piece[kWarps], s_total[kWarps];
  __shared__ double s_hist_d[256];
  __shared__ unsigned s_hist_u[256];
  __shared__ float s_best[kWarps];
  __shared__ int s_best_i[kWarps];
  __shared__ int s_bin, s_piece_pick, s_token;
  __shared__ unsigned s_above_u;
  __shared__ double s_above_d, s_residual;
  __shared__ bool s_reached;

  const int row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* x = logits + int64_t(row) * ld;

  // 1. max and argmax, lowest id on ties (a thread sees its ids in increasing order).
  float best = -INFINITY;
  int best_i = 0x7fffffff;
  for (int i = threadIdx.x; i < V; i += kThreads) {
    const float v = x[i];
    if (v > best || (best_i == 0x7fffffff && v == v)) {
      best = v;
      best_i = i;
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_xor_sync(kFull, best, off);
    const int oi = __shfl_xor_sync(kFull, best_i, off);
    if (ob > best || (ob == best && oi < best_i)) {
      best = ob;
      best_i = oi;
    }
  }
  if (lane == 0) {
    s_best[warp] = best;
    s_best_i[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    best = s_best[lane];
    best_i = s_best_i[lane];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(kFull, best, off);
      const int oi = __shfl_xor_sync(kFull, best_i, off);
      if (ob > best || (ob == best && oi < best_i)) {
        best = ob;
        best_i = oi;
      }
    }
    if (lane == 0) {
      s_best[0] = best;
      s_best_i[0] = best_i == 0x7fffffff ? 0 : best_i;
    }
  }
  __syncthreads();
  const float xmax = s_best[0];
  const int argmax = s_best_i[0];
  if (!(xmax > -INFINITY)) {
    if (threadIdx.x == 0) {
      tokens[row] = argmax;
      logprobs[row] = NAN;
    }
    return;
  }

  int token = argmax;
  double total = 0.0;
  if (p.greedy) {
    double t = 0.0;
    for (int i = threadIdx.x; i < V; i += kThreads) t += weight_of(x[i], xmax, p.inv_t);
    total = block_sum(t, s_red);
  } else {
    // 2-4. filters, as a key floor and the min-p weight floor.
    uint32_t floor_key = 0u;
    if (p.top_k > 0 && p.top_k < V) floor_key = select_kth_key(x, V, p.top_k, s_hist_u, &s_bin, &s_above_u);
    if (p.top_p < 1.f) {
      double m = 0.0;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float xi = x[i];
        if (order_key(xi) >= floor_key) m += weight_of(xi, xmax, p.inv_t);
      }
      m = block_sum(m, s_red);
      const double target = double(p.top_p) * m;
      floor_key = select_mass_key(x, V, floor_key, target, xmax, p.inv_t, s_hist_d, &s_bin, &s_above_d, &s_reached);
    }
    const Keep keep{floor_key, p.min_p > 0.f ? p.min_p : 0.f, xmax, p.inv_t};

    // 5. draw: segment sums (with the total mass for the logprob), sub-segment sums, warp scan.
    piece_sums(x, 0, V, keep, s_piece, s_total);
    __syncthreads();
    if (threadIdx.x == 0) {
      double kept = 0.0, all = 0.0;
      for (int w = 0; w < kWarps; ++w) {
        kept += s_piece[w];
        all += s_total[w];
      }
      s_above_d = all;
      const float u = philox_uniform(seed, step, uint32_t(sample_index[row]), uint32_t(position[row]), kStreamToken);
      double residual = double(u) * kept;
      s_piece_pick = pick_piece(s_piece, &residual);
      s_residual = residual;
    }
    __syncthreads();
    total = s_above_d;
    const int seg_len = (V + kWarps - 1) / kWarps;
    int lo = 0, hi = V;
    if (s_piece_pick >= 0) {
      lo = min(V, s_piece_pick * seg_len);
      hi = min(V, lo + seg_len);
    }
    __syncthreads();
    piece_sums(x, lo, hi, keep, s_piece, nullptr);
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
    if (s_token >= 0) token = s_token;  // else (no kept mass anywhere: impossible, the max is kept) the argmax
  }
  if (threadIdx.x == 0) {
    tokens[row] = token;
    logprobs[row] = float(double(x[token]) * p.inv_t_d - double(xmax) * p.inv_t_d - log(total));
  }
}

__global__ void check_stops_kernel(int32_t* done, const int32_t* tokens, const int32_t* gen_len,
                                   const int32_t* seq_len, const int32_t* max_new, int max_total,
                                   const int32_t* stop_ids, int n_stop, int B) {
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
  sample_kernel<<<unsigned(B), kThreads, 0, ctx.stream>>>(tokens, logprobs, logits, ld, V, rp, seed, step,
                                                          sample_index, position);
  CUDA_CHECK_LAST();
}

void check_stops(int32_t* done, const int32_t* tokens, const int32_t* gen_len, const int32_t* seq_len,
                 const int32_t* max_new, int max_total, const int32_t* stop_ids, int n_stop, int B,
                 const GpuContext& ctx) {
  HONE_CHECK(B >= 0 && n_stop >= 0, "bad check_stops shape B=", B, " n_stop=", n_stop);
  if (B == 0) return;
  check_stops_kernel<<<unsigned((B + 255) / 256), 256, 0, ctx.stream>>>(done, tokens, gen_len, seq_len, max_new,
                                                                       max_total, stop_ids, n_stop, B);
  CUDA_CHECK_LAST();
}

}  // namespace hone::cuda
