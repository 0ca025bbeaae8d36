// Causal attention over packed variable-length sequences with grouped-query heads (fp32 CPU reference).
// Forward keeps the log-sum-exp of every query row; backward recomputes the probabilities from it, as flash
// attention does: P_ij = exp(scale q_i.k_j - lse_i), dS_ij = P_ij (dout_i.v_j - rowsum(dout_i * out_i)).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

namespace {

void check_layout(const int32_t* cu_seqlens, int num_seqs, int T, int Hq, int Hkv) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(num_seqs >= 0 && cu_seqlens[0] == 0 && cu_seqlens[num_seqs] == T, "cu_seqlens must run from 0 to T=",
             T, ", got ", cu_seqlens[0], "..", cu_seqlens[num_seqs]);
  for (int s = 0; s < num_seqs; ++s)
    HONE_CHECK(cu_seqlens[s] <= cu_seqlens[s + 1], "cu_seqlens decreases at sequence ", s);
}

inline float dot(const float* a, const float* b, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const int32_t* cu_seqlens, int num_seqs, int T, int Hq, int Hkv, int D, float scale) {
  check_layout(cu_seqlens, num_seqs, T, Hq, Hkv);
  const int group = Hq / Hkv;
  const bool parallel = int64_t(Hq) * T * D > 16384;  // tiny problems run serially: no thread start-up cost
  // start[i]: the first row of row i's sequence.
  std::vector<int> start(static_cast<size_t>(T));
  for (int s = 0; s < num_seqs; ++s)
    for (int i = cu_seqlens[s]; i < cu_seqlens[s + 1]; ++i) start[size_t(i)] = cu_seqlens[s];

#pragma omp parallel if (parallel)
  {
    std::vector<float> p;
    std::vector<float> acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 8)
    for (int64_t hi = 0; hi < int64_t(Hq) * T; ++hi) {
      const int h = int(hi / T), i = int(hi % T), g = h / group, b = start[size_t(i)];
      const float* qi = q + (int64_t(i) * Hq + h) * D;
      p.resize(size_t(i - b + 1));
      float m = -std::numeric_limits<float>::infinity();
      for (int j = b; j <= i; ++j) {
        const float sc = scale * dot(qi, k + (int64_t(j) * Hkv + g) * D, D);
        p[size_t(j - b)] = sc;
        m = std::max(m, sc);
      }
      double l = 0.0;
      for (float& x : p) {
        x = std::exp(x - m);
        l += x;
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int j = b; j <= i; ++j) {
        const float pj = p[size_t(j - b)];
        const float* vj = v + (int64_t(j) * Hkv + g) * D;
        for (int d = 0; d < D; ++d) acc[size_t(d)] += pj * vj[d];
      }
      const float inv_l = float(1.0 / l);
      float* o = out + (int64_t(i) * Hq + h) * D;
      for (int d = 0; d < D; ++d) o[d] = acc[size_t(d)] * inv_l;
      lse[int64_t(h) * T + i] = m + float(std::log(l));
    }
  }
}

// One task per (sequence, kv head): it alone writes dk, dv of that head's rows and dq of its query heads, so the
// accumulations need no atomics. The gradients are written (as cuDNN writes them): they start from zero here.
void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                        const float* q, const float* k, const float* v, const int32_t* cu_seqlens, int num_seqs,
                        int T, int Hq, int Hkv, int D, float scale) {
  check_layout(cu_seqlens, num_seqs, T, Hq, Hkv);
  std::fill(dq, dq + int64_t(T) * Hq * D, 0.f);
  std::fill(dk, dk + int64_t(T) * Hkv * D, 0.f);
  std::fill(dv, dv + int64_t(T) * Hkv * D, 0.f);
  const int group = Hq / Hkv;
  const bool parallel = int64_t(Hq) * T * D > 16384;
#pragma omp parallel if (parallel)
  {
    std::vector<float> ds;
    std::vector<float> dqi(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 1)
    for (int64_t sg = 0; sg < int64_t(num_seqs) * Hkv; ++sg) {
      const int s = int(sg / Hkv), g = int(sg % Hkv);
      const int b = cu_seqlens[s], e = cu_seqlens[s + 1];
      for (int h = g * group; h < (g + 1) * group; ++h) {
        for (int i = b; i < e; ++i) {
          const int64_t qo = (int64_t(i) * Hq + h) * D;
          const float* qi = q + qo;
          const float* gi = dout + qo;
          const float Di = dot(gi, out + qo, D);
          const float li = lse[int64_t(h) * T + i];
          ds.resize(size_t(i - b + 1));
          for (int j = b; j <= i; ++j) {
            const int64_t ko = (int64_t(j) * Hkv + g) * D;
            const float pij = std::exp(scale * dot(qi, k + ko, D) - li);
            const float dpij = dot(gi, v + ko, D);
            float* dvj = dv + ko;
            for (int d = 0; d < D; ++d) dvj[d] += pij * gi[d];
            ds[size_t(j - b)] = pij * (dpij - Di) * scale;
          }
          std::fill(dqi.begin(), dqi.end(), 0.f);
          for (int j = b; j <= i; ++j) {
            const int64_t ko = (int64_t(j) * Hkv + g) * D;
            const float dsij = ds[size_t(j - b)];
            const float* kj = k + ko;
            float* dkj = dk + ko;
            for (int d = 0; d < D; ++d) {
              dqi[size_t(d)] += dsij * kj[d];
              dkj[d] += dsij * qi[d];
            }
          }
          float* dqo = dq + qo;
          for (int d = 0; d < D; ++d) dqo[d] += dqi[size_t(d)];
        }
      }
    }
  }
}

}  // namespace hone::cpu
