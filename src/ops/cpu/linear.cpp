// Linear layer (fp32 CPU reference) on OpenBLAS: out = x W^T (+ b) with W stored [out_features, in_features].
#include "ops/cpu/gemm.h"

#include "ops/ops.h"

namespace hone::cpu {

void linear_forward(float* out, const float* x, const float* w, const float* bias, int T, int IC, int OC) {
  if (T == 0 || OC == 0) return;
  if (IC == 0) {
    for (int64_t i = 0; i < int64_t(T) * OC; ++i) out[i] = 0.f;
  } else {
    gemm(false, true, T, OC, IC, 1.f, x, IC, w, IC, 0.f, out, OC);
  }
  if (bias) {
#pragma omp parallel for if (int64_t(T) * OC > 65536)
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < OC; ++o) out[int64_t(t) * OC + o] += bias[o];
  }
}

void linear_forward_pair(float* out0, float* out1, const float* x, const float* w0, const float* w1, int T, int IC,
                         int OC) {
  linear_forward(out0, x, w0, nullptr, T, IC, OC);
  linear_forward(out1, x, w1, nullptr, T, IC, OC);
}

// dx[T, IC] (+)= dout[T, OC] W[OC, IC];  dW[OC, IC] += dout^T x;  dbias[OC] += column sums of dout. Each may be
// null: the tensor-parallel layers form the input gradient of a few rows at a time and the weight gradient once.
// dx is written (accumulate_dx false) or added to; with OC == 0 a written dx is all zeros.
void linear_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x, const float* w, int T,
                     int IC, int OC, bool accumulate_dx) {
  if (dx && !accumulate_dx && OC == 0 && IC > 0)
    for (int64_t i = 0; i < int64_t(T) * IC; ++i) dx[i] = 0.f;
  if (T == 0 || OC == 0 || IC == 0) {
    if (dbias && T > 0 && IC == 0) {
      for (int t = 0; t < T; ++t)
        for (int o = 0; o < OC; ++o) dbias[o] += dout[int64_t(t) * OC + o];
    }
    return;
  }
  if (dx)
    gemm(false, false, T, IC, OC, 1.f, dout, OC, w, IC, accumulate_dx ? 1.f : 0.f,
                dx, IC);
  if (dw) gemm(true, false, OC, IC, T, 1.f, dout, OC, x, IC, 1.f, dw, IC);
  if (dbias) {
#pragma omp parallel for if (int64_t(T) * OC > 65536)
    for (int o = 0; o < OC; ++o) {
      double s = 0.0;
      for (int t = 0; t < T; ++t) s += dout[int64_t(t) * OC + o];
      dbias[o] += float(s);
    }
  }
}

}  // namespace hone::cpu
