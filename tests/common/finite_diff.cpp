// Finite differences and closeness reports for the op tests.
#include "common/finite_diff.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

namespace test {

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> nan_floats(size_t n) { return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()); }

bool all_finite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

double weighted_sum(const float* out, const float* r, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; ++i) s += double(r[i]) * out[i];
  return s;
}

std::vector<double> numerical_gradient(float* x, size_t n, const std::function<double()>& loss, float eps) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) {
    const float keep = x[i];
    x[i] = keep + eps;
    const double hi = loss();
    const double step_hi = double(x[i]) - keep;  // the step actually taken in fp32
    x[i] = keep - eps;
    const double lo = loss();
    const double step_lo = double(keep) - x[i];
    x[i] = keep;
    g[i] = (hi - lo) / (step_hi + step_lo);
  }
  return g;
}

std::vector<double> added(const std::vector<float>& got, const std::vector<float>& before) {
  std::vector<double> d(got.size());
  for (size_t i = 0; i < got.size(); ++i) d[i] = double(got[i]) - double(before[i]);
  return d;
}

namespace {

template <typename G>
std::string mismatch_impl(const std::string& what, const G* got, const double* want, size_t n, double atol,
                          double rtol) {
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(double(got[i]) - want[i]);
    double ratio = err == 0.0 ? 0.0 : err / (atol + rtol * std::fabs(want[i]));
    if (!std::isfinite(double(got[i]))) ratio = std::numeric_limits<double>::infinity();
    if (!(ratio <= worst)) {
      worst = ratio;
      at = i;
    }
  }
  if (worst <= 1.0) return "";
  std::ostringstream os;
  os.precision(9);
  os << what << ": element " << at << " of " << n << " is " << double(got[at]) << ", expected " << want[at]
     << " (|diff| " << std::fabs(double(got[at]) - want[at]) << " > atol " << atol << " + rtol " << rtol
     << " * |expected|, worst ratio " << worst << ")";
  return os.str();
}

}  // namespace

std::string mismatch(const std::string& what, const double* got, const double* want, size_t n, double atol,
                     double rtol) {
  return mismatch_impl(what, got, want, n, atol, rtol);
}

std::string mismatch(const std::string& what, const float* got, const double* want, size_t n, double atol,
                     double rtol) {
  return mismatch_impl(what, got, want, n, atol, rtol);
}

std::string gradient_mismatch(const std::string& what, const std::vector<double>& analytic,
                              const std::vector<double>& numeric, double tol) {
  if (analytic.size() != numeric.size()) return what + ": gradient sizes differ";
  double scale = 0.0;
  for (double x : numeric) scale = std::max(scale, std::fabs(x));
  if (scale == 0.0) scale = 1.0;
  return mismatch(what, analytic.data(), numeric.data(), analytic.size(), tol * scale, tol);
}

}  // namespace test
