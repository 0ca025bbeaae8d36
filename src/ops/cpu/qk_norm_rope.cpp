// Qwen3's per-head q/k RMSNorm followed by RoPE as one op (fp32 CPU reference of cuda/qk_norm_rope.cu). The
// arithmetic is rmsnorm_forward's then rope_forward's, operation for operation (sum of squares in double, angles
// in double rounded once), so the result equals the two-op chain; only the normed rows are not stored.
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

namespace {

// cos and sin of float(pos) * inv_freq for one token, D/2 values each: rope.cpp's row_angles.
void token_angles(float* cs, float* sn, int32_t pos, const float* inv_freq, int half) {
  for (int i = 0; i < half; ++i) {
    const float a = float(pos) * inv_freq[i];
    cs[i] = float(std::cos(double(a)));
    sn[i] = float(std::sin(double(a)));
  }
}

void check_shape(int H, int D) {
  HONE_CHECK(D > 0 && D % 2 == 0, "qk_norm_rope: head_dim must be even and positive, got ", D);
  HONE_CHECK(H > 0, "qk_norm_rope: needs at least one head, got ", H);
}

}  // namespace

void qk_norm_rope_forward(float* out, float* rstd, const float* x, const float* w, const int32_t* pos,
                          const float* inv_freq, int T, int H, int D, float eps, int64_t ldx) {
  if (T <= 0) return;
  check_shape(H, D);
  if (ldx == 0) ldx = int64_t(H) * D;
  const int half = D / 2;
#pragma omp parallel if (int64_t(T) * H * D > 65536)
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half)), n(static_cast<size_t>(D));
#pragma omp for
    for (int t = 0; t < T; ++t) {
      token_angles(cs.data(), sn.data(), pos[t], inv_freq, half);
      for (int h = 0; h < H; ++h) {
        const int64_t r = int64_t(t) * H + h;
        const float* xr = x + int64_t(t) * ldx + int64_t(h) * D;
        float* o = out + r * D;
        double ss = 0.0;
        for (int c = 0; c < D; ++c) ss += double(xr[c]) * xr[c];
        const float rs = 1.0f / std::sqrt(float(ss / D) + eps);
        rstd[r] = rs;
        for (int c = 0; c < D; ++c) n[size_t(c)] = w[c] * (xr[c] * rs);
        for (int i = 0; i < half; ++i) {
          const float a = n[size_t(i)], b = n[size_t(i + half)];
          o[i] = a * cs[size_t(i)] + (-b) * sn[size_t(i)];
          o[i + half] = b * cs[size_t(i)] + a * sn[size_t(i)];
        }
      }
    }
  }
}

// dn = R^T dout (the transposed rotation), then with r = rstd:
//   dx_j = r (dn_j w_j - x_j r^2 sum_c(dn_c w_c x_c) / D)  (written),   dw_c += sum_rows dn_c x_c r.
void qk_norm_rope_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                           const int32_t* pos, const float* inv_freq, int T, int H, int D) {
  if (T <= 0) return;
  check_shape(H, D);
  const int half = D / 2;
  const int64_t rows = int64_t(T) * H;
  std::vector<float> dn(size_t(rows) * size_t(D));  // kept for the serial dw pass below
#pragma omp parallel if (rows * D > 65536)
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for
    for (int t = 0; t < T; ++t) {
      token_angles(cs.data(), sn.data(), pos[t], inv_freq, half);
      for (int h = 0; h < H; ++h) {
        const int64_t r = int64_t(t) * H + h;
        const float* g = dout + r * D;
        const float* xr = x + r * D;
        float* d = dn.data() + r * D;
        float* o = dx + r * D;
        for (int i = 0; i < half; ++i) {
          const float ga = g[i], gb = g[i + half];
          d[i] = ga * cs[size_t(i)] + gb * sn[size_t(i)];
          d[i + half] = gb * cs[size_t(i)] - ga * sn[size_t(i)];
        }
        const float rs = rstd[r];
        double dot = 0.0;
        for (int c = 0; c < D; ++c) dot += double(d[c]) * w[c] * xr[c];
        const float k = float(dot / D) * rs * rs;
        for (int c = 0; c < D; ++c) o[c] = rs * (d[c] * w[c] - xr[c] * k);
      }
    }
  }
  // Rows share dw: a serial pass in row order keeps the sum race-free and in rmsnorm_backward's order.
  for (int64_t r = 0; r < rows; ++r) {
    const float* d = dn.data() + r * D;
    const float* xr = x + r * D;
    const float rs = rstd[r];
    for (int c = 0; c < D; ++c) dw[c] += d[c] * xr[c] * rs;
  }
}

}  // namespace hone::cpu
