// Optimizer arithmetic on flat fp32 buffers (CPU reference): AdamW, the sum of squares for the gradient norm, and
// in-place scaling for gradient clipping.
#include <cmath>

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

double sum_squares(const float* x, int64_t N) {
  double s = 0.0;
#pragma omp parallel for reduction(+ : s) if (N > 65536)
  for (int64_t i = 0; i < N; ++i) s += double(x[i]) * x[i];
  return s;
}

void scale_inplace(float* x, float s, int64_t N) {
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) x[i] *= s;
}

}  // namespace hone::cpu
