// RMSNorm (fp32 CPU reference), with Hugging Face Llama/Qwen's order of operations:
//   variance = mean(x^2); rstd = rsqrt(variance + eps); out = w * (x * rstd).
#include <cmath>

#include "ops/ops.h"

namespace hone::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int rows, int C, float eps) {
#pragma omp parallel for if (int64_t(rows) * C > 65536)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * C;
    float* o = out + int64_t(r) * C;
    double ss = 0.0;  // the sum in double: the mean is then correctly rounded to fp32
    for (int c = 0; c < C; ++c) ss += double(xr[c]) * xr[c];
    const float var = float(ss / C);
    const float rs = 1.0f / std::sqrt(var + eps);
    rstd[r] = rs;
    for (int c = 0; c < C; ++c) o[c] = w[c] * (xr[c] * rs);
  }
}

// out_c = w_c x_c r with r = (mean(x^2) + eps)^(-1/2), dr/dx_j = -r^3 x_j / C, so
//   dx_j = r (dout_j w_j - x_j r^2 sum_c(dout_c w_c x_c) / C),   dw_c = sum_rows dout_c x_c r.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int rows, int C, bool accumulate) {
#pragma omp parallel for if (int64_t(rows) * C > 65536)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * C;
    const float* g = dout + int64_t(r) * C;
    float* d = dx + int64_t(r) * C;
    const float rs = rstd[r];
    double dot = 0.0;
    for (int c = 0; c < C; ++c) dot += double(g[c]) * w[c] * xr[c];
    const float k = float(dot / C) * rs * rs;
    for (int c = 0; c < C; ++c) {
      const float v = rs * (g[c] * w[c] - xr[c] * k);
      d[c] = accumulate ? d[c] + v : v;
    }
  }
  // Rows share dw: a serial pass over rows keeps the sum race-free (and vectorizes over C).
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + int64_t(r) * C;
    const float* g = dout + int64_t(r) * C;
    const float rs = rstd[r];
    for (int c = 0; c < C; ++c) dw[c] += g[c] * xr[c] * rs;
  }
}

}  // namespace hone::cpu
