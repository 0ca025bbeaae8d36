// How far a computed array is from its reference, for every suite and test program: the relative L2 error.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

// sqrt(sum (got - want)^2 / sum want^2), or the absolute L2 error when want is all zero. Infinite when either array
// holds a non-finite value (so NaN never passes a tolerance) or when the sizes differ.
inline double rel_l2(const float* got, const float* want, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) return INFINITY;
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

inline double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  return rel_l2(got.data(), want.data(), int64_t(want.size()));
}

}  // namespace test
