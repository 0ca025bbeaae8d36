// One query row of decode attention in fp32, shared by the contiguous and the paged CPU references so both keep
// exactly the arithmetic of attention_forward's row loop (fp32 scores, max-subtracted exp, sum in double, fp32
// accumulation of p_j v_j, one multiply by 1/l). Only where token j's K and V rows live differs: `row_of(j)` gives
// their element offset in k/v. p holds >= n floats, acc >= D floats (caller-owned scratch).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace hone::cpu {

template <typename RowOf>
inline void decode_attention_row(float* o, const float* qi, const float* k, const float* v, int n, int D,
                                 float scale, RowOf row_of, float* p, float* acc) {
  float m = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < n; ++j) {
    const float* kj = k + row_of(j);
    float s = 0.f;
    for (int d = 0; d < D; ++d) s += qi[d] * kj[d];
    const float sc = scale * s;
    p[j] = sc;
    m = std::max(m, sc);
  }
  double l = 0.0;
  for (int j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - m);
    l += p[j];
  }
  std::fill(acc, acc + D, 0.f);
  for (int j = 0; j < n; ++j) {
    const float pj = p[j];
    const float* vj = v + row_of(j);
    for (int d = 0; d < D; ++d) acc[d] += pj * vj[d];
  }
  const float inv_l = float(1.0 / l);
  for (int d = 0; d < D; ++d) o[d] = acc[d] * inv_l;
}

}  // namespace hone::cpu
