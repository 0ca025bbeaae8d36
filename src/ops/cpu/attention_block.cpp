// The blocks of ring attention (fp32 CPU reference): full attention of query segments against key segments, its
// backward from the merged output and log-sum-exp, and the merge of partial results by their log-sum-exp. The
// ring (parallel/ring_attention.cpp) runs the diagonal block with the causal attention_forward and every other
// block with these, so the arithmetic is the causal attention's, regrouped by key block.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

namespace {

void check_segments(const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(seg.count >= 0, "negative segment count ", seg.count);
  int q_end = 0;
  for (int s = 0; s < seg.count; ++s) {
    const int qs = seg.q_start[s], ql = seg.q_len[s], ks = seg.kv_start[s], kl = seg.kv_len[s];
    HONE_CHECK(qs >= q_end && ql >= 0 && qs + ql <= Tq, "query segment ", s, " [", qs, ", ", qs + ql,
               ") is out of order or outside [0, ", Tq, ")");
    HONE_CHECK(ks >= 0 && kl >= 1 && ks + kl <= Tkv, "key segment ", s, " [", ks, ", ", ks + kl, ") is empty or outside [0, ",
               Tkv, ")");
    HONE_CHECK(ql <= seg.max_q && kl <= seg.max_kv, "segment ", s, " is longer than max_q ", seg.max_q, " / max_kv ",
               seg.max_kv);
    q_end = qs + ql;
  }
}

inline float dot(const float* a, const float* b, int D) {
  float s = 0.f;
  for (int d = 0; d < D; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

void attention_block_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale) {
  check_segments(seg, Tq, Tkv, Hq, Hkv);
  const int group = Hq / Hkv;
  int64_t work = 0;
  for (int s = 0; s < seg.count; ++s) work += int64_t(seg.q_len[s]) * seg.kv_len[s];
  const bool parallel = work * Hq * D > 16384;
#pragma omp parallel if (parallel)
  {
    std::vector<float> p;
    std::vector<float> acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int s = 0; s < seg.count; ++s)
      for (int h = 0; h < Hq; ++h) {
        const int g = h / group, kb = seg.kv_start[s], kn = seg.kv_len[s];
        p.resize(size_t(kn));
        for (int i = seg.q_start[s]; i < seg.q_start[s] + seg.q_len[s]; ++i) {
          const float* qi = q + (int64_t(i) * Hq + h) * D;
          float m = -std::numeric_limits<float>::infinity();
          for (int j = 0; j < kn; ++j) {
            const float sc = scale * dot(qi, k + (int64_t(kb + j) * Hkv + g) * D, D);
            p[size_t(j)] = sc;
            m = std::max(m, sc);
          }
          double l = 0.0;
          for (float& x : p) {
            x = std::exp(x - m);
            l += x;
          }
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int j = 0; j < kn; ++j) {
            const float* vj = v + (int64_t(kb + j) * Hkv + g) * D;
            for (int d = 0; d < D; ++d) acc[size_t(d)] += p[size_t(j)] * vj[d];
          }
          const float inv_l = float(1.0 / l);
          float* o = out + (int64_t(i) * Hq + h) * D;
          for (int d = 0; d < D; ++d) o[d] = acc[size_t(d)] * inv_l;
          lse[int64_t(h) * Tq + i] = m + float(std::log(l));
        }
      }
  }
}

// One task per (segment, kv head): it alone writes dk, dv of the segment's key rows for that head and dq of its
// query rows for the head's query group, so the accumulations need no atomics.
void attention_block_backward(float* dq, float* dk, float* dv, const float* dout, const float* out, const float* lse,
                              const float* q, const float* k, const float* v, const AttentionSegments& seg, int Tq,
                              int Tkv, int Hq, int Hkv, int D, float scale) {
  check_segments(seg, Tq, Tkv, Hq, Hkv);
  const int group = Hq / Hkv;
  int64_t work = 0;
  for (int s = 0; s < seg.count; ++s) work += int64_t(seg.q_len[s]) * seg.kv_len[s];
  const bool parallel = work * Hq * D > 16384;
#pragma omp parallel if (parallel)
  {
    std::vector<float> ds;
    std::vector<float> dqi(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 1) collapse(2)
    for (int s = 0; s < seg.count; ++s)
      for (int g = 0; g < Hkv; ++g) {
        const int kb = seg.kv_start[s], kn = seg.kv_len[s];
        ds.resize(size_t(kn));
        for (int h = g * group; h < (g + 1) * group; ++h)
          for (int i = seg.q_start[s]; i < seg.q_start[s] + seg.q_len[s]; ++i) {
            const int64_t qo = (int64_t(i) * Hq + h) * D;
            const float* qi = q + qo;
            const float* gi = dout + qo;
            const float Di = dot(gi, out + qo, D);
            const float li = lse[int64_t(h) * Tq + i];
            for (int j = 0; j < kn; ++j) {
              const int64_t ko = (int64_t(kb + j) * Hkv + g) * D;
              const float pij = std::exp(scale * dot(qi, k + ko, D) - li);
              const float dpij = dot(gi, v + ko, D);
              float* dvj = dv + ko;
              for (int d = 0; d < D; ++d) dvj[d] += pij * gi[d];
              ds[size_t(j)] = pij * (dpij - Di) * scale;
            }
            std::fill(dqi.begin(), dqi.end(), 0.f);
            for (int j = 0; j < kn; ++j) {
              const int64_t ko = (int64_t(kb + j) * Hkv + g) * D;
              const float dsij = ds[size_t(j)];
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

void attention_merge_forward(float* out, float* lse, const float* block_out, const float* block_lse,
                             const AttentionSegments& seg, int T, int H, int D) {
  for (int s = 0; s < seg.count; ++s)
    HONE_CHECK(seg.q_start[s] >= 0 && seg.q_len[s] >= 0 && seg.q_start[s] + seg.q_len[s] <= T, "merge segment ", s,
               " outside [0, ", T, ")");
  for (int s = 0; s < seg.count; ++s)
    for (int h = 0; h < H; ++h)
      for (int i = seg.q_start[s]; i < seg.q_start[s] + seg.q_len[s]; ++i) {
        float& l = lse[int64_t(h) * T + i];
        const float lb = block_lse[int64_t(h) * T + i];
        float* o = out + (int64_t(i) * H + h) * D;
        const float* ob = block_out + (int64_t(i) * H + h) * D;
        if (l == -std::numeric_limits<float>::infinity()) {
          std::copy(ob, ob + D, o);
          l = lb;
          continue;
        }
        const float m = std::max(l, lb);
        const float wa = std::exp(l - m), wb = std::exp(lb - m), sum = wa + wb;
        for (int d = 0; d < D; ++d) o[d] = (wa * o[d] + wb * ob[d]) / sum;
        l = m + std::log(sum);
      }
}

}  // namespace hone::cpu
