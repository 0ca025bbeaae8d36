// Decode attention (fp32 CPU reference): one query row per sequence against that sequence's KV cache slot.
// The arithmetic follows attention_forward's row loop (fp32 scores, max-subtracted exp, sum in double, fp32
// accumulation of p_j v_j, one multiply by 1/l), so a decoded token sees the same attention as in a packed forward.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void attention_decode_forward(float* out, const float* q, const float* k_cache, const float* v_cache,
                              const int32_t* slots, const int32_t* lens, int B, int max_len, int Hq, int Hkv, int D,
                              float scale) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(B >= 0 && max_len > 0 && D > 0, "bad decode attention shape B=", B, " max_len=", max_len, " D=", D);
  for (int b = 0; b < B; ++b) {
    HONE_CHECK(lens[b] >= 1 && lens[b] <= max_len, "sequence ", b, " has cache length ", lens[b],
               " outside [1, ", max_len, "]");
    HONE_CHECK(!slots || slots[b] >= 0, "sequence ", b, " has a negative cache slot ", slots ? slots[b] : 0);
  }
  const int group = Hq / Hkv;
  int64_t work = 0;
  for (int b = 0; b < B; ++b) work += int64_t(lens[b]) * Hq * D;
  const bool parallel = work > (int64_t(1) << 22);  // threads pay off only for long caches and big batches
#pragma omp parallel if (parallel)
  {
    // Per-thread scratch kept across calls: the decode loop calls this once per layer and step.
    thread_local std::vector<float> p, acc;
    if (p.size() < size_t(max_len)) p.resize(size_t(max_len));
    if (acc.size() < size_t(D)) acc.resize(size_t(D));
#pragma omp for schedule(dynamic, 4)
    for (int64_t bh = 0; bh < int64_t(B) * Hq; ++bh) {
      const int b = int(bh / Hq), h = int(bh % Hq), g = h / group, n = lens[b];
      const int64_t slot = slots ? slots[b] : b;
      const float* kb = k_cache + slot * max_len * Hkv * D;
      const float* vb = v_cache + slot * max_len * Hkv * D;
      const float* qi = q + (int64_t(b) * Hq + h) * D;
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) {
        const float* kj = kb + (int64_t(j) * Hkv + g) * D;
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += qi[d] * kj[d];
        const float sc = scale * s;
        p[size_t(j)] = sc;
        m = std::max(m, sc);
      }
      double l = 0.0;
      for (int j = 0; j < n; ++j) {
        p[size_t(j)] = std::exp(p[size_t(j)] - m);
        l += p[size_t(j)];
      }
      std::fill(acc.begin(), acc.begin() + D, 0.f);
      for (int j = 0; j < n; ++j) {
        const float pj = p[size_t(j)];
        const float* vj = vb + (int64_t(j) * Hkv + g) * D;
        for (int d = 0; d < D; ++d) acc[size_t(d)] += pj * vj[d];
      }
      const float inv_l = float(1.0 / l);
      float* o = out + (int64_t(b) * Hq + h) * D;
      for (int d = 0; d < D; ++d) o[d] = acc[size_t(d)] * inv_l;
    }
  }
}

}  // namespace hone::cpu
