// Mixture-of-experts ops (fp32 CPU reference): the router's softmax and top-k, the routing plan (assignments
// sorted by expert), the permutation of token rows into expert order and back, the experts' grouped linear layers,
// and the load-balancing statistics. What each computes: src/ops/ops.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/gemm.h"

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void moe_topk_forward(float* probs, int32_t* topk_idx, float* topk_w, const float* logits, int T, int E, int k,
                      bool norm_topk_prob) {
  HONE_CHECK(k >= 1 && k <= E, "top-k of ", k, " experts out of ", E);
#pragma omp parallel for if (int64_t(T) * E > 65536)
  for (int t = 0; t < T; ++t) {
    const float* z = logits + int64_t(t) * E;
    float* p = probs + int64_t(t) * E;
    float m = -INFINITY;
    for (int e = 0; e < E; ++e) m = std::max(m, z[e]);
    double s = 0;
    for (int e = 0; e < E; ++e) s += std::exp(double(z[e]) - m);
    for (int e = 0; e < E; ++e) p[e] = float(std::exp(double(z[e]) - m) / s);
    // Selection by repeated maximum: the larger probability first, the lower expert id among equals.
    int32_t* idx = topk_idx + int64_t(t) * k;
    float* w = topk_w + int64_t(t) * k;
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      int best = -1;
      for (int e = 0; e < E; ++e) {
        bool taken = false;
        for (int i = 0; i < j; ++i) taken = taken || idx[i] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      idx[j] = best;
      w[j] = p[best];
      sum += p[best];
    }
    if (norm_topk_prob)
      for (int j = 0; j < k; ++j) w[j] = float(double(w[j]) / sum);
  }
}

void moe_topk_backward(float* dlogits, const float* dtopk_w, const float* daux, const float* probs,
                       const int32_t* topk_idx, const float* topk_w, int T, int E, int k, bool norm_topk_prob) {
#pragma omp parallel for if (int64_t(T) * E > 65536)
  for (int t = 0; t < T; ++t) {
    const float* p = probs + int64_t(t) * E;
    const int32_t* idx = topk_idx + int64_t(t) * k;
    const float* w = topk_w + int64_t(t) * k;
    const float* dw = dtopk_w + int64_t(t) * k;
    std::vector<double> dp(size_t(E), 0.0);
    if (daux)
      for (int e = 0; e < E; ++e) dp[size_t(e)] = daux[e];
    // w_j = p_j / S (S = the sum of the selected p): dp_j = (dw_j - sum_i dw_i w_i) / S; without it dp_j = dw_j.
    if (norm_topk_prob) {
      double s = 0, dot = 0;
      for (int j = 0; j < k; ++j) s += p[idx[j]], dot += double(dw[j]) * w[j];
      for (int j = 0; j < k; ++j) dp[size_t(idx[j])] += (dw[j] - dot) / s;
    } else {
      for (int j = 0; j < k; ++j) dp[size_t(idx[j])] += dw[j];
    }
    double pdp = 0;
    for (int e = 0; e < E; ++e) pdp += double(p[e]) * dp[size_t(e)];
    float* dz = dlogits + int64_t(t) * E;
    for (int e = 0; e < E; ++e) dz[e] += float(p[e] * (dp[size_t(e)] - pdp));
  }
}

void moe_topk_replay(int32_t* topk_idx, float* topk_w, const float* probs, const int32_t* forced, int64_t row_stride,
                     int T, int E, int k, bool norm_topk_prob) {
  for (int t = 0; t < T; ++t) {
    const int32_t* f = forced + int64_t(t) * row_stride;
    if (f[0] < 0) continue;
    const float* p = probs + int64_t(t) * E;
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      HONE_CHECK(f[j] >= 0 && f[j] < E, "replayed expert ", f[j], " outside [0, ", E, ")");
      topk_idx[int64_t(t) * k + j] = f[j];
      sum += p[f[j]];
    }
    for (int j = 0; j < k; ++j) topk_w[int64_t(t) * k + j] = norm_topk_prob ? float(p[f[j]] / sum) : p[f[j]];
  }
}

void moe_route(int32_t* offsets, int32_t* row_of, int32_t* token_of, const int32_t* topk_idx, int T, int k, int E) {
  const int64_t N = int64_t(T) * k;
  std::fill(offsets, offsets + E + 1, 0);
  for (int64_t a = 0; a < N; ++a) {
    const int e = topk_idx[a];
    HONE_CHECK(e >= 0 && e < E, "expert id ", e, " outside [0, ", E, ")");
    ++offsets[e + 1];
  }
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  std::vector<int32_t> next(offsets, offsets + E);
  for (int64_t a = 0; a < N; ++a) {
    const int32_t r = next[size_t(topk_idx[a])]++;
    row_of[a] = r;
    token_of[r] = int32_t(a / k);
  }
}

void moe_permute_forward(float* xp, const float* x, const int32_t* token_of, int N, int C) {
#pragma omp parallel for if (int64_t(N) * C > 65536)
  for (int r = 0; r < N; ++r) std::memcpy(xp + int64_t(r) * C, x + int64_t(token_of[r]) * C, size_t(C) * sizeof(float));
}

void moe_permute_backward(float* dx, const float* dxp, const int32_t* row_of, int T, int k, int C) {
#pragma omp parallel for if (int64_t(T) * C > 65536)
  for (int t = 0; t < T; ++t) {
    float* d = dx + int64_t(t) * C;
    for (int j = 0; j < k; ++j) {
      const float* src = dxp + int64_t(row_of[int64_t(t) * k + j]) * C;
      for (int c = 0; c < C; ++c) d[c] += src[c];
    }
  }
}

void moe_unpermute_forward(float* y, const float* yp, const int32_t* row_of, const float* topk_w, int T, int k,
                           int C) {
#pragma omp parallel for if (int64_t(T) * C > 65536)
  for (int t = 0; t < T; ++t) {
    float* out = y + int64_t(t) * C;
    std::fill(out, out + C, 0.f);
    for (int j = 0; j < k; ++j) {
      const float w = topk_w[int64_t(t) * k + j];
      const float* src = yp + int64_t(row_of[int64_t(t) * k + j]) * C;
      for (int c = 0; c < C; ++c) out[c] += w * src[c];
    }
  }
}

void moe_unpermute_backward(float* dyp, float* dtopk_w, const float* dy, const float* yp, const int32_t* row_of,
                            const float* topk_w, int T, int k, int C) {
#pragma omp parallel for if (int64_t(T) * C > 65536)
  for (int t = 0; t < T; ++t) {
    const float* g = dy + int64_t(t) * C;
    for (int j = 0; j < k; ++j) {
      const int64_t a = int64_t(t) * k + j;
      const int64_t r = row_of[a];
      const float w = topk_w[a];
      float* d = dyp + r * C;
      const float* v = yp + r * C;
      double dot = 0;
      for (int c = 0; c < C; ++c) {
        d[c] += w * g[c];
        dot += double(g[c]) * v[c];
      }
      if (dtopk_w) dtopk_w[a] += float(dot);
    }
  }
}

void moe_grouped_linear_forward(float* out, const float* x, const float* w, const int32_t* offsets, int E, int IC,
                                int OC) {
  for (int e = 0; e < E; ++e) {
    const int b = offsets[e], n = offsets[e + 1] - b;
    if (n > 0) linear_forward(out + int64_t(b) * OC, x + int64_t(b) * IC, w + int64_t(e) * OC * IC, nullptr, n, IC, OC);
  }
}

void moe_grouped_linear_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                                 const int32_t* offsets, int E, int IC, int OC) {
  for (int e = 0; e < E; ++e) {
    const int b = offsets[e], n = offsets[e + 1] - b;
    if (n == 0) continue;
    const int64_t we = int64_t(e) * OC * IC;
    if (dx)
      gemm(false, false, n, IC, OC, 1.f, dout + int64_t(b) * OC, OC, w + we, IC,
                  1.f, dx + int64_t(b) * IC, IC);
    gemm(true, false, OC, IC, n, 1.f, dout + int64_t(b) * OC, OC,
                x + int64_t(b) * IC, IC, 1.f, dw + we, IC);
  }
}

void moe_router_stats(float* prob_sum, const float* probs, int T, int E) {
  for (int e = 0; e < E; ++e) {
    double s = 0;
    for (int t = 0; t < T; ++t) s += probs[int64_t(t) * E + e];
    prob_sum[e] += float(s);
  }
}

void moe_expert_counts(int32_t* counts, const int32_t* topk_idx, int T, int k, int E) {
  std::fill(counts, counts + E, 0);
  for (int64_t a = 0; a < int64_t(T) * k; ++a) ++counts[topk_idx[a]];
}

void moe_aux_loss_backward(float* daux, const int32_t* counts, int L, int E, float scale) {
  for (int e = 0; e < E; ++e) {
    int64_t n = 0;
    for (int l = 0; l < L; ++l) n += counts[int64_t(l) * E + e];
    daux[e] = float(double(scale) * double(n));
  }
}

}  // namespace hone::cpu
