// The top-p step of the fused sampler's row-wide path: part of cuda/sampler.cu's translation unit, included inside
// its anonymous namespace after the helpers it uses (order_key, weight_of, warp_sum, Segments, visit_row). It finds
// top-p's threshold key by a radix select over the order-preserving key whose histograms hold masses in double
// (4 levels of 8-bit digits, one read of the row each), for rows that do not finish in the top-k candidate path
// (cuda/sampler_topk.cuh): top-p or min-p without top-k, and top-k rows whose candidates overflow its slots.

// Adds `value` to the mass histogram's hist[bin] for lanes with `active`: each bin's lanes are summed first and one
// lane adds their sum. A double atomic in shared memory is a compare-and-swap loop, and at top-p's first level a
// row's logits fall into about ten bins (sign and exponent): lane by lane, the lanes of one bin retry against each
// other and against the other warps (profiled on an H100: 21 shared-memory wavefronts a logit, 16 active lanes).
__device__ __forceinline__ void hist_add_mass(double* hist, bool active, int bin, double value) {
  const int lane = threadIdx.x & 31;
  for (unsigned left = __ballot_sync(kFull, active); left;) {
    const int first = __ffs(left) - 1;
    const int b = __shfl_sync(kFull, bin, first);
    const bool mine = active && bin == b;
    const double s = warp_sum(mine ? value : 0.0);
    if (lane == first) atomicAdd(&hist[b], s);
    left &= ~__ballot_sync(kFull, mine);
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

// The key theta of the largest logit among candidates (key >= floor_key) with sum_{key >= theta} w >= target;
// floor_key (keep every candidate) when the candidates' mass is below the target.
__device__ uint32_t select_mass_key(const float* x, const Segments& seg, uint32_t floor_key, double target,
                                    float xmax, float inv_t, double* hist, int* s_bin, double* s_above,
                                    bool* s_reached) {
  uint32_t prefix = 0, mask = 0;
  double need = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) hist[i] = 0.0;
    __syncthreads();
    visit_row<2>(x, seg, [&](float v, int, bool valid) {  // 2 loads in flight: with 4 the kernel spills
      const uint32_t key = order_key(v);
      const bool active = valid && key >= floor_key && (key & mask) == prefix;
      hist_add_mass(hist, active, int((key >> shift) & 255u), active ? double(weight_of(v, xmax, inv_t)) : 0.0);
    });
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
