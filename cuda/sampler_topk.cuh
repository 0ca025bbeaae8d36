// The top-k candidate path of the fused sampler: part of cuda/sampler.cu's translation unit, included inside its
// anonymous namespace after the helpers it shares (order_key, weight_of, hist_add, Segments, visit_row, the warp
// scans). It
// exists so that a row with top-k on reads its logits 3 times (the fused pass, one histogram, one gather) instead of
// up to 11: the few tokens that can survive top-k are gathered into shared memory once, and top-k, top-p, min-p and
// the draw are decided there. The rules and their order are those of the row-wide path (sampler.cu's header).
//
// k-th key: a radix select over the order-preserving key with digits of 12, 12 and 8 bits (one histogram, one read
// of the row, per level; 4096 bins keep the first level's bins narrow enough that the usual k stops there). After
// each level the bin of the k-th largest key gives a lower bound on it, and the count of keys at or above that bound
// is known exactly; as soon as that count fits kCap the keys above the bound are gathered (key and id) and the
// levels stop. When even the last level's count (every key >= the exact k-th key: k plus its ties) does not fit,
// the exact k-th key is handed back and the row takes the row-wide path from its top-p step on.
//
// In shared memory: one sort by key (descending, ids ascending among equal keys) gives the k-th key at position
// k - 1 and the top-k survivors as a prefix; prefix masses over it (double) give top-p's threshold key as on the row
// -wide path (the largest key whose tail mass reaches p * their mass; its ties kept); a second sort of that prefix
// by id gives the draw's ascending id order, over which one scan of the kept weights (min-p applied) finds the first
// kept token whose running mass exceeds u * (kept mass), or the last kept one when rounding leaves it unreached.
// Weights are recomputed from the key (the key is a bijection of the non-NaN floats), the same fp32 expf as the
// row-wide path, so both paths decide on the same values; only the order of double additions differs.

constexpr int kCap = 4096;  // gathered candidates: 32 KB of uint64 in shared memory, 4 per thread in the scans
constexpr int kBins = 4096;  // the widest digit's histogram, in the candidates' memory before the gather
static_assert(kCap == 4 * kThreads && kBins == 4 * kThreads);

__device__ __forceinline__ float key_float(uint32_t key) {  // order_key's inverse; key 0 (NaN) gives a NaN
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// Exclusive scan over the block in thread order: returns the sum of v over the threads before this one and sets
// *total, in a fixed order of additions (every thread gets the same total). Starts with a barrier; a value a thread
// writes to shared memory before the call is seen by every thread after it.
template <typename T>
__device__ T block_exclusive_scan(T v, T* s_warp, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T incl = warp_inclusive_scan(v, lane);
  __syncthreads();  // s_warp's previous readers are done
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  const T wt = s_warp[lane];  // kWarps == 32: one warp total per lane
  const T wincl = warp_inclusive_scan(wt, lane);
  T wexcl = __shfl_up_sync(kFull, wincl, 1);
  if (lane == 0) wexcl = T(0);
  *total = __shfl_sync(kFull, wincl, 31);
  const T before_warp = __shfl_sync(kFull, wexcl, warp);
  T lane_excl = __shfl_up_sync(kFull, incl, 1);
  if (lane == 0) lane_excl = T(0);
  return before_warp + lane_excl;
}

// Sorts s[0, n) ascending; n a power of two in [64, kCap]. Bitonic: the stages of partners less than 32 apart run in
// registers with shuffles (one barrier per merge), the wider ones in shared memory. Called by every thread.
__device__ __forceinline__ uint64_t bitonic_step(uint64_t v, int i, int j, int k) {
  const uint64_t o = __shfl_xor_sync(kFull, v, j);
  const bool ascending = (i & k) == 0, lower = (i & j) == 0;
  return (lower == ascending) == (v < o) ? v : o;  // the lower of an ascending pair keeps the smaller value
}

__device__ void bitonic_sort(uint64_t* s, int n) {
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += kThreads) {  // whole warps: n is a multiple of 32
    uint64_t v = s[i];
#pragma unroll
    for (int k = 2; k <= 32; k <<= 1)
#pragma unroll
      for (int j = k >> 1; j > 0; j >>= 1) v = bitonic_step(v, i, j, k);
    s[i] = v;
  }
  __syncthreads();
  for (int k = 64; k <= n; k <<= 1) {
    for (int j = k >> 1; j >= 32; j >>= 1) {
      for (int t = threadIdx.x; t < n / 2; t += kThreads) {
        const int i = ((t & ~(j - 1)) << 1) | (t & (j - 1)), l = i | j;
        const uint64_t a = s[i], b = s[l];
        if ((a > b) == ((i & k) == 0)) {
          s[i] = b;
          s[l] = a;
        }
      }
      __syncthreads();
    }
    for (int i = threadIdx.x; i < n; i += kThreads) {
      uint64_t v = s[i];
#pragma unroll
      for (int j = 16; j > 0; j >>= 1) v = bitonic_step(v, i, j, k);
      s[i] = v;
    }
    __syncthreads();
  }
}

__device__ __forceinline__ int sort_size(int n) {  // the power of two >= n, at least 64
  return n <= 64 ? 64 : 1 << (32 - __clz(n - 1));
}

union TopkBuffer {  // the histogram until the gather, then the candidates
  unsigned hist[kBins];
  uint64_t cand[kCap];
};

struct TopkShared {
  unsigned warp_u[kWarps];
  double warp_d[kWarps];
  int bin, first, last, bound;
  unsigned above, at, count;
  float u;
};

// Every thread: the highest bin b of hist[0, kBins) with sum_{b' >= b} hist[b'] >= need (1 <= need <= the total),
// *above the count of the bins above it and *at its own.
__device__ int select_bin_wide(const unsigned* hist, unsigned need, TopkShared& sh, unsigned* above, unsigned* at) {
  const int hi = kBins - 1 - 4 * int(threadIdx.x);  // thread 0 holds the highest bins
  unsigned h[4], s = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) s += (h[j] = hist[hi - j]);
  unsigned total;
  const unsigned excl = block_exclusive_scan(s, sh.warp_u, &total);
  if (excl < need && need <= excl + s) {  // exactly one thread
    unsigned cum = excl;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (cum + h[j] >= need) {
        sh.bin = hi - j;
        sh.above = cum;
        sh.at = h[j];
        break;
      }
      cum += h[j];
    }
  }
  __syncthreads();
  *above = sh.above;
  *at = sh.at;
  return sh.bin;
}

// Every thread: the number of leading entries of the descending list s[0, n) (keys in the high words, stored
// inverted) whose key is >= key, which is at least 1 (key is one of theirs).
__device__ int count_at_least(const uint64_t* s, int n, uint32_t key, TopkShared& sh) {
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const bool in = ~uint32_t(s[i] >> 32) >= key;
    const bool next_in = i + 1 < n && ~uint32_t(s[i + 1] >> 32) >= key;
    if (in && !next_in) sh.bound = i + 1;
  }
  __syncthreads();
  const int r = sh.bound;
  __syncthreads();  // read before the next writer
  return r;
}

// The candidate path for a row with 0 < k < V and a finite max xmax. Returns true with *token drawn, or false with
// *kth_key the k-th largest key when the candidates do not fit (the row then takes the row-wide path from top-p on).
// Called by every thread; every thread gets the same answer.
__device__ bool sample_topk_candidates(const float* x, const Segments& seg, const RowParams& p, float xmax,
                                       uint64_t seed, uint32_t step, uint32_t sample, uint32_t position, int* token,
                                       uint32_t* kth_key) {
  __shared__ TopkBuffer buf;
  __shared__ TopkShared sh;
  unsigned* hist = buf.hist;
  uint64_t* cand = buf.cand;
  const int k = p.top_k;
  if (threadIdx.x == 0) sh.count = 0;

  // The levels: 12 bits (31..20), 12 bits (19..8), 8 bits (7..0) of the key.
  uint32_t prefix = 0, mask = 0, lo = 0;
  unsigned need = unsigned(k);
  bool fits = false;
  for (int level = 0; level < 3 && !fits; ++level) {
    const int shift = level == 0 ? 20 : level == 1 ? 8 : 0;
    const uint32_t digit = level == 2 ? 0xffu : 0xfffu;
    __syncthreads();  // the previous level's readers of hist are done
    for (int i = threadIdx.x; i < kBins; i += kThreads) hist[i] = 0u;
    __syncthreads();
    visit_row<4>(x, seg, [&](float v, int, bool valid) {
      const uint32_t key = order_key(v);
      hist_add<unsigned>(hist, valid && (key & mask) == prefix, int((key >> shift) & digit), 1u);
    });
    __syncthreads();
    unsigned above, at;
    const int bin = select_bin_wide(hist, need, sh, &above, &at);
    lo = prefix | (uint32_t(bin) << shift);
    // Keys >= lo: the (k - need) above this level's range, those in the bins above, and the bin's own.
    fits = (unsigned(k) - need) + above + at <= unsigned(kCap);
    prefix = lo;
    mask |= digit << shift;
    need -= above;
  }
  if (!fits) {
    *kth_key = prefix;  // all 32 bits chosen: the exact k-th largest key
    return false;
  }

  // The gather: (inverted key, id) of every key >= lo, so an ascending sort puts keys descending, ids ascending.
  __syncthreads();  // hist's readers are done
  const int lane = threadIdx.x & 31;
  visit_row<4>(x, seg, [&](float v, int id, bool valid) {
    const uint32_t key = order_key(v);
    const bool take = valid && key >= lo;
    const unsigned m = __ballot_sync(kFull, take);
    if (m == 0) return;
    const int leader = __ffs(m) - 1;
    unsigned slot = 0;
    if (lane == leader) slot = atomicAdd(&sh.count, unsigned(__popc(m)));
    slot = __shfl_sync(kFull, slot, leader) + unsigned(__popc(m & ((1u << lane) - 1u)));
    if (take && slot < unsigned(kCap)) cand[slot] = (uint64_t(~key) << 32) | uint32_t(id);
  });
  __syncthreads();
  const int n = min(int(sh.count), kCap);  // the histogram's count exactly: k <= n
  const int n2 = sort_size(n);
  for (int i = n + int(threadIdx.x); i < n2; i += kThreads) cand[i] = ~uint64_t(0);  // sorts last
  bitonic_sort(cand, n2);

  // top-k: every key >= the k-th.
  auto key_at = [&](int i) { return ~uint32_t(cand[i] >> 32); };
  const int nk = count_at_least(cand, n, key_at(k - 1), sh);

  // top-p over the top-k survivors: the first position whose running mass reaches p * (their mass) gives the key.
  int np = nk;
  const int i0 = 4 * int(threadIdx.x);
  if (p.top_p < 1.f) {
    double run[4], s = 0.0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int i = i0 + j;
      s += i < nk ? double(weight_of(key_float(key_at(i)), xmax, p.inv_t)) : 0.0;
      run[j] = s;
    }
    if (threadIdx.x == 0) sh.first = kNone;
    double mass;
    const double before = block_exclusive_scan(s, sh.warp_d, &mass);
    const double target = double(p.top_p) * mass;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (i0 + j < nk && before + run[j] >= target) {
        atomicMin(&sh.first, i0 + j);
        break;
      }
    __syncthreads();
    const int first = sh.first;
    if (first != kNone) np = count_at_least(cand, nk, key_at(first), sh);  // else keep all: rounding, as row-wide
  }

  // The draw over cand[0, np) in ascending id order: (id, key) sorted.
  for (int i = int(threadIdx.x); i < sort_size(np); i += kThreads)
    cand[i] = i < np ? (uint64_t(uint32_t(cand[i])) << 32) | key_at(i) : ~uint64_t(0);
  bitonic_sort(cand, sort_size(np));
  const float min_p = p.min_p > 0.f ? p.min_p : 0.f;
  double run[4], s = 0.0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int i = i0 + j;
    float w = 0.f;
    if (i < np) {
      w = weight_of(key_float(uint32_t(cand[i])), xmax, p.inv_t);
      if (!(w >= min_p)) w = 0.f;
    }
    s += double(w);
    run[j] = w > 0.f ? s : -1.0;  // -1: not drawable
  }
  if (threadIdx.x == 0) {
    sh.first = kNone;
    sh.last = -1;
    sh.u = philox_uniform(seed, step, sample, position, kStreamToken);
  }
  double kept;
  const double before = block_exclusive_scan(s, sh.warp_d, &kept);
  const double residual = double(sh.u) * kept;
  int last = -1;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (run[j] < 0.0) continue;
    last = i0 + j;
    if (before + run[j] > residual) {
      atomicMin(&sh.first, i0 + j);
      break;
    }
  }
  if (last >= 0) atomicMax(&sh.last, last);
  __syncthreads();
  const int pick = sh.first != kNone ? sh.first : sh.last;
  if (pick >= 0) *token = int(cand[pick] >> 32);  // else (no kept mass: impossible, the max is kept) unchanged
  return true;
}
