// The LM head fused with log-softmax gather and entropy (fp32 CPU reference). Logits exist only as one
// [rows, chunk_v] block at a time: rows with a target are gathered kRowBlock at a time, and the vocabulary is walked
// chunk_v rows of W at a time with an online log-sum-exp. Per row it keeps the running max m, s = sum exp(z - m) and
// u = sum exp(z - m) (z - m) (both in double), so that lse = m + log s and entropy = log s - u / s without forming
// lse - E[z] from two large numbers. Backward recomputes each logits chunk from h and W; the saved variant
// (lm_head_saved_forward/backward) keeps the whole [T, V] logits from its forward instead.
#include "ops/cpu/gemm.h"

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
  gemm(false, true, R, n, C, 1.f, hb, C, w + int64_t(v0) * C, C, 0.f, z, ldz);
}

}  // namespace

namespace {

// Per row with a target, over the logits z = h W[0, V)^T / temperature: the running max m, s = sum exp(z - m) and
// u = sum exp(z - m) (z - m) in double, and z at the target (targets[t] - vocab_begin when in [0, V); else 0).
// fn(t, m, s, u, zt) receives each row's result.
template <typename Fn>
void lm_head_row_stats(const float* h, const float* w, const int32_t* targets, int T, int C, int V, int vocab_begin,
                       float temperature, int chunk_v, const std::vector<int>& rows, Fn&& fn) {
  const int cv = std::min(chunk_v, V);
  const int nrows = int(rows.size());
  const int RB = std::min(kRowBlock, std::max(nrows, 1));
  std::vector<float> hb(size_t(RB) * C), z(size_t(RB) * cv), zt(static_cast<size_t>(RB)), m(static_cast<size_t>(RB));
  std::vector<double> s(static_cast<size_t>(RB)), u(static_cast<size_t>(RB));
  (void)T;

  for (int r0 = 0; r0 < nrows; r0 += RB) {
    const int R = std::min(RB, nrows - r0);
    gather_rows(hb.data(), h, rows, r0, R, C);
    std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
    std::fill(s.begin(), s.end(), 0.0);
    std::fill(u.begin(), u.end(), 0.0);
    std::fill(zt.begin(), zt.end(), 0.f);
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
        const int tv = targets[rows[size_t(r0 + r)]] - vocab_begin - v0;
        if (tv >= 0 && tv < n) zt[size_t(r)] = zr[tv];
      }
    }
    for (int r = 0; r < R; ++r) fn(rows[size_t(r0 + r)], m[size_t(r)], s[size_t(r)], u[size_t(r)], zt[size_t(r)]);
  }
}

// The rows with a target (targets[t] >= 0), unchecked against the vocabulary (a slice sees global ids).
std::vector<int> rows_with_any_target(const int32_t* targets, int T) {
  std::vector<int> rows;
  for (int t = 0; t < T; ++t)
    if (targets[t] >= 0) rows.push_back(t);
  return rows;
}

// dlogits of row t in place of its n logits zr (raw: not yet divided by the temperature); tv: the target's column.
void row_dlogits(float* zr, int n, int tv, int t, const float* dlogprob, const float* dentropy, const float* lse,
                 const float* entropy, float temperature) {
  const float g_lp = dlogprob[t], g_h = dentropy ? dentropy[t] : 0.f;
  const float l = lse[t], H = entropy ? entropy[t] : 0.f;
  for (int j = 0; j < n; ++j) {
    const float logp = zr[j] / temperature - l;
    const float p = std::exp(logp);
    float dz = g_lp * ((j == tv ? 1.f : 0.f) - p);
    if (dentropy) dz += g_h * (-p * (logp + H));
    zr[j] = dz / temperature;  // now d(loss)/d(logit)
  }
}

// dlogits of one chunk in place of its logits z[R, n] (columns v0.. of the slice), for the rows rows[r0..).
void chunk_dlogits(float* z, int cv, int R, int n, int v0, int vocab_begin, const std::vector<int>& rows, int r0,
                   const int32_t* targets, const float* dlogprob, const float* dentropy, const float* lse,
                   const float* entropy, float temperature) {
#pragma omp parallel for if (int64_t(R) * n > 65536)
  for (int r = 0; r < R; ++r) {
    const int t = rows[size_t(r0 + r)];
    row_dlogits(z + int64_t(r) * cv, n, targets[t] - vocab_begin - v0, t, dlogprob, dentropy, lse, entropy,
                temperature);
  }
}

// The backward over the slice's V rows of W: dh[rows] += dlogits W, dw += dlogits^T h.
void lm_head_backward_rows(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                           const float* w, const int32_t* targets, const float* lse, const float* entropy, int C, int V,
                           int vocab_begin, float temperature, int chunk_v, const std::vector<int>& rows) {
  const int cv = std::min(chunk_v, V);
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
      chunk_dlogits(z.data(), cv, R, n, v0, vocab_begin, rows, r0, targets, dlogprob, dentropy, lse, entropy,
                    temperature);
      // dhb[R, C] += dlogits[R, n] W_chunk[n, C];  dW_chunk[n, C] += dlogits^T hb
      gemm(false, false, R, C, n, 1.f, z.data(), cv, w + int64_t(v0) * C, C, 1.f,
                  dhb.data(), C);
      gemm(true, false, n, C, R, 1.f, z.data(), cv, hb.data(), C, 1.f,
                  dw + int64_t(v0) * C, C);
    }
    for (int r = 0; r < R; ++r) {
      float* d = dh + int64_t(rows[size_t(r0 + r)]) * C;
      const float* src = dhb.data() + int64_t(r) * C;
      for (int c = 0; c < C; ++c) d[c] += src[c];
    }
  }
}

}  // namespace

void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  for (int t = 0; t < T; ++t) {
    if (targets[t] >= 0) continue;
    logprob[t] = 0.f;
    lse[t] = 0.f;
    if (entropy) entropy[t] = 0.f;
  }
  const std::vector<int> rows = rows_with_targets(targets, T, V);
  lm_head_row_stats(h, w, targets, T, C, V, 0, temperature, chunk_v, rows,
                    [&](int t, float m, double s, double u, float zt) {
                      const double log_s = std::log(s);
                      const float l = float(double(m) + log_s);
                      lse[t] = l;
                      logprob[t] = zt - l;
                      if (entropy) entropy[t] = float(log_s - u / s);
                    });
}

// d/dz_j of logprob = [j == target] - p_j; of entropy = -p_j (log p_j + H); z = logits / temperature.
void lm_head_logprob_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                              const float* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  lm_head_backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, C, V, 0, temperature, chunk_v,
                        rows_with_targets(targets, T, V));
}

size_t lm_head_saved_bytes(int T, int V, int chunk_v) {
  (void)chunk_v;
  return size_t(T) * size_t(V) * sizeof(float);
}

// saved: the raw logits h W^T [T, V], fp32.
void lm_head_saved_forward(float* logprob, float* entropy, float* lse, void* saved, const float* h, const float* w,
                           const int32_t* targets, int T, int C, int V, float temperature, int chunk_v) {
  lm_head_logprob_forward(logprob, entropy, lse, h, w, targets, T, C, V, temperature, chunk_v);
  if (T > 0) lm_head_logits(static_cast<float*>(saved), h, w, T, C, V);
}

void lm_head_saved_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                            const float* w, const int32_t* targets, const float* lse, const float* entropy,
                            void* saved, int T, int C, int V, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  if (T == 0) return;
  float* z = static_cast<float*>(saved);
  (void)rows_with_targets(targets, T, V);  // checks the ids
#pragma omp parallel for if (int64_t(T) * V > 65536)
  for (int t = 0; t < T; ++t) {
    float* zr = z + int64_t(t) * V;
    if (targets[t] < 0) std::fill(zr, zr + V, 0.f);
    else row_dlogits(zr, V, targets[t], t, dlogprob, dentropy, lse, entropy, temperature);
  }
  gemm(false, false, T, C, V, 1.f, z, V, w, C, 1.f, dh, C);
  gemm(true, false, V, C, T, 1.f, z, V, h, C, 1.f, dw, C);
}

void lm_head_vocab_slice_forward(float* stats, const float* h, const float* w, const int32_t* targets, int T, int C,
                                 int V, int vocab_begin, int vocab_valid, float temperature, int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(vocab_valid >= 0 && vocab_valid <= V, "vocab_valid ", vocab_valid, " outside [0, ", V, "]");
  for (int i = 0; i < 4 * T; ++i) stats[i] = 0.f;
  for (int t = 0; t < T; ++t) stats[t] = -std::numeric_limits<float>::infinity();
  if (vocab_valid == 0) return;  // a slice of padding only: no logits
  lm_head_row_stats(h, w, targets, T, C, vocab_valid, vocab_begin, temperature, chunk_v,
                    rows_with_any_target(targets, T), [&](int t, float m, double s, double u, float zt) {
                      stats[t] = m;
                      stats[T + t] = float(s);
                      stats[2 * T + t] = float(u);
                      stats[3 * T + t] = zt;
                    });
}

void lm_head_stats_rescale(float* stats, const float* max, int T) {
  for (int t = 0; t < T; ++t) {
    const float m = stats[t], M = max[t];
    float& s = stats[T + t];
    float& u = stats[2 * T + t];
    if (s > 0.f) {  // u and s move to the common max: exp(z - M) = exp(z - m) exp(m - M)
      const double shift = double(m) - double(M), f = std::exp(shift);
      u = float(f * (double(u) + shift * double(s)));
      s = float(f * double(s));
    } else {
      s = u = 0.f;
    }
    stats[t] = M;
  }
}

void lm_head_stats_finish(float* logprob, float* entropy, float* lse, const float* stats, const int32_t* targets,
                          int T) {
  for (int t = 0; t < T; ++t) {
    if (targets[t] < 0) {
      logprob[t] = lse[t] = 0.f;
      if (entropy) entropy[t] = 0.f;
      continue;
    }
    const double s = stats[T + t], log_s = std::log(s);
    const float l = float(double(stats[t]) + log_s);
    lse[t] = l;
    logprob[t] = stats[3 * T + t] - l;
    if (entropy) entropy[t] = float(log_s - double(stats[2 * T + t]) / s);
  }
}

void lm_head_vocab_slice_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                                  const float* w, const int32_t* targets, const float* lse, const float* entropy,
                                  int T, int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                  int chunk_v) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  HONE_CHECK(vocab_valid >= 0 && vocab_valid <= V, "vocab_valid ", vocab_valid, " outside [0, ", V, "]");
  if (vocab_valid == 0) return;
  lm_head_backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, C, vocab_valid, vocab_begin,
                        temperature, chunk_v, rows_with_any_target(targets, T));
}

void lm_head_logits(float* logits, const float* h, const float* w, int T, int C, int V) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  if (T == 0) return;
  gemm(false, true, T, V, C, 1.f, h, C, w, C, 0.f, logits, V);
}

}  // namespace hone::cpu
