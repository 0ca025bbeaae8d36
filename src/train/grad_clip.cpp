// Global-norm gradient clipping on a flat gradient buffer.
#include "train/grad_clip.h"

#include <cmath>

#include "ops/ops.h"

namespace hone {

float clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.f;
  return float(max_norm / (norm + 1e-6));
}

double clip_grad_norm(float* grad, int64_t n, double max_norm) {
  const double norm = std::sqrt(cpu::sum_squares(grad, n));
  const float coef = clip_coefficient(norm, max_norm);
  if (coef < 1.f) cpu::scale_inplace(grad, coef, n);
  return norm;
}

}  // namespace hone
