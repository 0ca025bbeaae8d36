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

double ShardedNorm::local(const float* g, int64_t flat_begin, int64_t n) const {
  return weighted_sum_squares ? weighted_sum_squares(g, flat_begin, n) : cpu::sum_squares(g, n);
}

double ShardedNorm::sum_over_group(double local_sum) const {
  if (sum) return sum(local_sum);
  if (group && group->size() > 1) group->all_reduce_sum(&local_sum, 1);
  return local_sum;
}

}  // namespace hone
