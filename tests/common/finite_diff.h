// Helpers for checking ops: seeded random inputs, NaN-poisoned outputs, the scalar test loss L = sum r * out, its
// central finite differences, and a closeness report naming the worst element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace test {

// A size as size_t (a function call, so `std::vector<float> v(len(n))` is never read as a declaration).
inline size_t len(int64_t n) { return static_cast<size_t>(n); }

// n uniform values in [lo, hi), reproducible from seed.
std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f);

// n quiet NaNs: an output buffer poisoned so that elements an op fails to write stay visible.
std::vector<float> nan_floats(size_t n);

bool all_finite(const float* x, size_t n);

// sum_i r_i out_i, accumulated in double.
double weighted_sum(const float* out, const float* r, size_t n);

// d loss / d x_i by central differences (loss(x + eps e_i) - loss(x - eps e_i)) / 2 eps for every i; x is perturbed
// in place and restored exactly.
std::vector<double> numerical_gradient(float* x, size_t n, const std::function<double()>& loss, float eps);

// got - before, element by element, in double: the part of an accumulated gradient that one backward call added.
std::vector<double> added(const std::vector<float>& got, const std::vector<float>& before);

// "" when |got_i - want_i| <= atol + rtol |want_i| for all i, else a message naming what, the worst index and values.
std::string mismatch(const std::string& what, const double* got, const double* want, size_t n, double atol,
                     double rtol);
std::string mismatch(const std::string& what, const float* got, const double* want, size_t n, double atol,
                     double rtol);

// Gradient check with a tolerance scaled to the gradient: atol = tol * max_i |want_i|, rtol = tol.
std::string gradient_mismatch(const std::string& what, const std::vector<double>& analytic,
                              const std::vector<double>& numeric, double tol);

}  // namespace test
