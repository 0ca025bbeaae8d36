// Residual add (fp32 CPU reference): out = a + b. Its backward is the identity on both inputs, so it has none.
#include "ops/ops.h"

namespace hone::cpu {

// out may alias a or b.
void add_forward(float* out, const float* a, const float* b, int64_t N) {
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) out[i] = a[i] + b[i];
}

}  // namespace hone::cpu
