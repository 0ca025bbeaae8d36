// SwiGLU gating (fp32 CPU reference): out = silu(gate) * up, silu(g) = g / (1 + exp(-g)) as torch computes it.
#include <cmath>

#include "ops/ops.h"

namespace hone::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, int64_t N) {
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// d silu/dg = sig (1 + g (1 - sig)) with sig = 1 / (1 + exp(-g)). dgate/dup are written or (accumulate) added to.
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t N,
                     bool accumulate) {
#pragma omp parallel for if (N > 65536)
  for (int64_t i = 0; i < N; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + std::exp(-g));
    const float silu = g * sig;
    const float dg = dout[i] * up[i] * sig * (1.0f + g * (1.0f - sig)), du = dout[i] * silu;
    dgate[i] = accumulate ? dgate[i] + dg : dg;
    dup[i] = accumulate ? dup[i] + du : du;
  }
}

}  // namespace hone::cpu
