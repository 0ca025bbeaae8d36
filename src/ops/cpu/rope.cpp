// Rotary position embedding (fp32 CPU reference), as Hugging Face applies it: pairs (i, i + D/2) (rotate_half),
//   out_i = x_i cos - x_{i+D/2} sin,  out_{i+D/2} = x_{i+D/2} cos + x_i sin,  angle = float(pos) * inv_freq_i.
// The inverse frequencies mimic torch's fp32 arithmetic step by step (see doc/ops.md for how closely).
#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

namespace {

// 1 / theta^(2i/D): the exponent as torch forms it (fp32 arange / D), the power in double rounded once to fp32,
// the reciprocal in fp32. This matched torch 2.15 bit for bit on most sizes tried (doc/ops.md).
void default_inv_freq(float* inv, int D, float theta) {
  for (int i = 0; i < D / 2; ++i) {
    const float e = float(2 * i) / float(D);
    const float p = float(std::pow(double(theta), double(e)));
    inv[i] = 1.0f / p;
  }
}

// transformers' _compute_llama3_parameters, operation for operation in fp32. Python scalars meet fp32 tensors as
// fp32 values, and `scalar / tensor` is reciprocal(tensor) * scalar in torch.
void llama3_scale(float* inv, const RopeParams& p) {
  const double old_context_len = double(p.original_max_position_embeddings);
  const float low_freq_wavelen = float(old_context_len / double(p.low_freq_factor));
  const float high_freq_wavelen = float(old_context_len / double(p.high_freq_factor));
  const float two_pi = float(2.0 * M_PI);
  const float factor = p.factor;
  const float denom = float(double(p.high_freq_factor) - double(p.low_freq_factor));
  for (int i = 0; i < p.head_dim / 2; ++i) {
    const float f = inv[i];
    const float wavelen = (1.0f / f) * two_pi;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const float smooth = ((1.0f / wavelen) * float(old_context_len) - p.low_freq_factor) / denom;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    inv[i] = medium ? smoothed : scaled;
  }
}

// cos and sin of float(pos) * inv_freq for one row, D/2 values each (evaluated in double, rounded once).
void row_angles(float* cs, float* sn, int32_t pos, const float* inv_freq, int half) {
  for (int i = 0; i < half; ++i) {
    const float a = float(pos) * inv_freq[i];
    cs[i] = float(std::cos(double(a)));
    sn[i] = float(std::sin(double(a)));
  }
}

}  // namespace

void rope_inv_freq(float* inv_freq, const RopeParams& p) {
  HONE_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0, "RoPE head_dim must be even and positive, got ", p.head_dim);
  default_inv_freq(inv_freq, p.head_dim, p.theta);
  if (p.llama3) {
    HONE_CHECK(p.high_freq_factor != p.low_freq_factor, "llama3 rope_scaling needs high_freq_factor != low_freq_factor");
    llama3_scale(inv_freq, p);
  }
}

// out may alias x (in place, ldx 0): each pair is read before it is written.
void rope_forward(float* out, const float* x, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                  int64_t ldx) {
  const int half = D / 2;
  if (ldx == 0) ldx = int64_t(H) * D;
#pragma omp parallel if (int64_t(T) * H * D > 65536)
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for
    for (int t = 0; t < T; ++t) {
      row_angles(cs.data(), sn.data(), pos[t], inv_freq, half);
      for (int h = 0; h < H; ++h) {
        const int64_t base = (int64_t(t) * H + h) * D, xbase = int64_t(t) * ldx + int64_t(h) * D;
        for (int i = 0; i < half; ++i) {
          const float a = x[xbase + i], b = x[xbase + i + half];
          out[base + i] = a * cs[size_t(i)] + (-b) * sn[size_t(i)];
          out[base + i + half] = b * cs[size_t(i)] + a * sn[size_t(i)];
        }
      }
    }
  }
}

// The transpose of the rotation: dx_i += g_i cos + g_{i+D/2} sin, dx_{i+D/2} += g_{i+D/2} cos - g_i sin.
void rope_backward(float* dx, const float* dout, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                   bool accumulate) {
  const int half = D / 2;
#pragma omp parallel if (int64_t(T) * H * D > 65536)
  {
    std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
#pragma omp for
    for (int t = 0; t < T; ++t) {
      row_angles(cs.data(), sn.data(), pos[t], inv_freq, half);
      for (int h = 0; h < H; ++h) {
        const int64_t base = (int64_t(t) * H + h) * D;
        for (int i = 0; i < half; ++i) {
          const float ga = dout[base + i], gb = dout[base + i + half];
          const float lo = ga * cs[size_t(i)] + gb * sn[size_t(i)], hi = gb * cs[size_t(i)] - ga * sn[size_t(i)];
          dx[base + i] = accumulate ? dx[base + i] + lo : lo;
          dx[base + i + half] = accumulate ? dx[base + i + half] + hi : hi;
        }
      }
    }
  }
}

}  // namespace hone::cpu
