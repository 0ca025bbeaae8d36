// Moving per-row fp32 values between two row orders (fp32 CPU reference): the all-gathered rows of a
// context-parallel split back in the caller's order, and a rank's rows taken from the caller's.
#include "ops/ops.h"

namespace hone::cpu {

void scatter_rows_f32(float* full, const float* all, const int32_t* rows, int64_t n) {
  for (int64_t p = 0; p < n; ++p)
    if (rows[p] >= 0) full[rows[p]] = all[p];
}

void take_rows_f32(float* local, const float* full, const int32_t* rows, int64_t n) {
  for (int64_t i = 0; i < n; ++i) local[i] = rows[i] >= 0 ? full[rows[i]] : 0.f;
}

}  // namespace hone::cpu
