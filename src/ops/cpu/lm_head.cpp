// The LM head fused with log-softmax gather and entropy (fp32 CPU reference). Logits exist only as one
// [rows, chunk_v] block at a time: rows with a target are gathered kRowBlock at a time, and the vocabulary is walked
// chunk_v rows of W at a time with an online log-sum-exp. Per row it keeps the running max m, s = sum exp(z - m) and
// u = sum exp(z - m) (z - m) (both in double), so that lse = m + log s and entropy = log s - u / s without forming
// lse - E[z] from two large numbers. Backward recomputes each logits chunk from h and W.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

namespace {

// Rows per block: W (V x C, the largest matrix of the model) is streamed once per block, so blocks are large;
// the logits buffer is kRowBlock x chunk_v floats.
constexpr int kRowBlock = 512;

// The rows with a target (targets[t] >= 0), checked against V.
std::vector<int> rows_with_targets(const int32_t* targets, int T, int V) {
  std::vector<int> rows;
  for (int t = 0; t < T; ++t) {
    if (targets[t] < 0) continue;
    HONE_CHECK(targets[t] < V, "target ", targets[t], " at row ", t, " is outside the vocabulary of ", V);
    rows.push_back(t);
  }
  return rows;
}

void check_args(int T, int C, int V, float temperature, int chunk_v) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  HONE_CHECK(chunk_v > 0, "chunk_v must be positive, got ", chunk_v);
}

// hb[r, :] = h[rows[r0 + r], :] for r < R.
void gather_rows(float* hb, const float* h, const std::vector<int>& rows, int r0, int R, int C) {
  for (int r = 0; r < R; ++r)
    std::copy(h + int64_t(rows[size_t(r0 + r)]) * C, h + int64_t(rows[size_t(r0 + r)] + 1) * C, hb + int64_t(r) * C);
}

// z[R, n] = hb[R, C] W[v0 : v0 + n, C]^T, leading dimension ldz.
void logits_chunk(float* z, int ldz, const float* hb, const float* w, int R, int C, int v0, int n) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, n, C, 1.f, hb, C, w + int64_t(v0) * C, C, 0.f, z, ldz);
}

}  // namespace

void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  const int cv = std::min(chunk_v, V);
  for (int t = 0; t < T; ++t) {
    if (targets[t] >= 0) continue;
    logprob[t] = 0.f;
    lse[t] = 0.f;
    if (entropy) entropy[t] = 0.f;
  }
  const std::vector<int> rows = rows_with_targets(targets, T, V);
  const int nrows = int(rows.size());
  const int RB = std::min(kRowBlock, std::max(nrows, 1));
  std::vector<float> hb(size_t(RB) * C), z(size_t(RB) * cv), zt(static_cast<size_t>(RB)), m(static_cast<size_t>(RB));
  std::vector<double> s(static_cast<size_t>(RB)), u(static_cast<size_t>(RB));

  for (int r0 = 0; r0 < nrows; r0 += RB) {
    const int R = std::min(RB, nrows - r0);
    gather_rows(hb.data(), h, rows, r0, R, C);
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(s.begin(), s.end(), 0.0);
    std::fill(u.begin(), u.end(), 0.0);
    for (int v0 = 0; v0 < V; v0 += cv) {
      const int n = std::min(cv, V - v0);
      logits_chunk(z.data(), cv, hb.data(), w, R, C, v0, n);
#pragma omp parallel for if (int64_t(R) * n > 65536)
      for (int r = 0; r < R; ++r) {
        float* zr = z.data() + int64_t(r) * cv;
        float cm = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < n; ++j) {
          zr[j] /= temperature;
          cm = std::max(cm, zr[j]);
        }
        if (cm > m[size_t(r)]) {  // move the running sums to the new max: exp(z - m') = exp(z - m) exp(m - m')
          if (s[size_t(r)] > 0.0) {
            const double shift = double(m[size_t(r)]) - double(cm), f = std::exp(shift);
            u[size_t(r)] = f * (u[size_t(r)] + shift * s[size_t(r)]);
            s[size_t(r)] *= f;
          }
          m[size_t(r)] = cm;
        }
        const double mr = m[size_t(r)];
        double sr = 0.0, ur = 0.0;
        for (int j = 0; j < n; ++j) {
          const float d = zr[j] - float(mr), e = std::exp(d);  // exp in fp32, the sums in double
          sr += e;
          ur += double(e) * d;
        }
        s[size_t(r)] += sr;
        u[size_t(r)] += ur;
        const int tv = targets[rows[size_t(r0 + r)]] - v0;
        if (tv >= 0 && tv < n) zt[size_t(r)] = zr[tv];
      }
    }
    for (int r = 0; r < R; ++r) {
      const int t = rows[size_t(r0 + r)];
      const double log_s = std::log(s[size_t(r)]);
      const float l = float(double(m[size_t(r)]) + log_s);
      lse[t] = l;
      logprob[t] = zt[size_t(r)] - l;
      if (entropy) entropy[t] = float(log_s - u[size_t(r)] / s[size_t(r)]);
    }
  }
}

// d/dz_j of logprob = [j == target] - p_j; of entropy = -p_j (log p_j + H); z = logits / temperature.
void lm_head_logprob_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                              const float* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  const int cv = std::min(chunk_v, V);
  const std::vector<int> rows = rows_with_targets(targets, T, V);
  const int nrows = int(rows.size());
  const int RB = std::min(kRowBlock, std::max(nrows, 1));
  std::vector<float> hb(size_t(RB) * C), dhb(size_t(RB) * C), z(size_t(RB) * cv);

  for (int r0 = 0; r0 < nrows; r0 += RB) {
    const int R = std::min(RB, nrows - r0);
    gather_rows(hb.data(), h, rows, r0, R, C);
    std::fill(dhb.begin(), dhb.end(), 0.f);
    for (int v0 = 0; v0 < V; v0 += cv) {
      const int n = std::min(cv, V - v0);
      logits_chunk(z.data(), cv, hb.data(), w, R, C, v0, n);
#pragma omp parallel for if (int64_t(R) * n > 65536)
      for (int r = 0; r < R; ++r) {
        const int t = rows[size_t(r0 + r)];
        const int tv = targets[t] - v0;
        const float g_lp = dlogprob[t], g_h = dentropy ? dentropy[t] : 0.f;
        const float l = lse[t], H = entropy ? entropy[t] : 0.f;
        float* zr = z.data() + int64_t(r) * cv;
        for (int j = 0; j < n; ++j) {
          const float logp = zr[j] / temperature - l;
          const float p = std::exp(logp);
          float dz = g_lp * ((j == tv ? 1.f : 0.f) - p);
          if (dentropy) dz += g_h * (-p * (logp + H));
          zr[j] = dz / temperature;  // now d(loss)/d(logit)
        }
      }
      // dhb[R, C] += dlogits[R, n] W_chunk[n, C];  dW_chunk[n, C] += dlogits^T hb
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, C, n, 1.f, z.data(), cv, w + int64_t(v0) * C, C, 1.f,
                  dhb.data(), C);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, C, R, 1.f, z.data(), cv, hb.data(), C, 1.f,
                  dw + int64_t(v0) * C, C);
    }
    for (int r = 0; r < R; ++r) {
      float* d = dh + int64_t(rows[size_t(r0 + r)]) * C;
      const float* src = dhb.data() + int64_t(r) * C;
      for (int c = 0; c < C; ++c) d[c] += src[c];
    }
  }
}

void lm_head_logits(float* logits, const float* h, const float* w, int T, int C, int V) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  if (T == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, V, C, 1.f, h, C, w, C, 0.f, logits, V);
}

}  // namespace hone::cpu
