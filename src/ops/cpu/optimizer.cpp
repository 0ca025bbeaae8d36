// Optimizer arithmetic on flat fp32 buffers (CPU reference): AdamW, the sum of squares for the gradient norm, and
// in-place scaling for gradient clipping.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step) {
  HONE_CHECK(step >= 1, "AdamW step count is 1-based, got ", step);
  const float bc1 = float(1.0 - std::pow(double(beta1), step));
  const float bc2 = float(1.0 - std::pow(double(beta2), step));
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) {
    const float g = grad[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    const float mhat = m[i] / bc1;
    const float vhat = v[i] / bc2;
    param[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * param[i]);
  }
}

// In fixed chunks summed in order, so that the sum (the gradient norm) does not depend on the thread count, as an
// OpenMP reduction's partial sums per thread would.
double sum_squares(const float* x, int64_t N) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = (N + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(std::max<int64_t>(chunks, 0)), 0.0);
#pragma omp parallel for schedule(static) if (N > 65536)
  for (int64_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    for (int64_t i = c * kChunk, e = std::min(N, i + kChunk); i < e; ++i) s += double(x[i]) * x[i];
    part[size_t(c)] = s;
  }
  double s = 0.0;
  for (double p : part) s += p;
  return s;
}

void scale_inplace(float* x, float s, int64_t N) {
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) x[i] *= s;
}

}  // namespace hone::cpu
