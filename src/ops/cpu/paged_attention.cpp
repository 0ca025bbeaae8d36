// Decode attention over a paged KV cache (fp32 CPU reference of cuda/generation_ops.h's paged decode): the
// arithmetic of attention_decode_forward (fp32 scores, max-subtracted exp, sum in double, fp32 accumulation of
// p_j v_j, one multiply by 1/l); only the address of token j changes (block table lookup).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void paged_attention_decode_forward(float* out, const float* q, const float* k_pool, const float* v_pool,
                                    const int32_t* block_tables, const int32_t* seq_lens, int B, int max_blocks,
                                    int block_size, int Hq, int Hkv, int D, float scale) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(B >= 0 && max_blocks > 0 && block_size > 0 && D > 0, "bad paged decode shape B=", B, " max_blocks=",
             max_blocks, " block_size=", block_size, " D=", D);
  for (int b = 0; b < B; ++b) {
    HONE_CHECK(seq_lens[b] >= 1 && int64_t(seq_lens[b]) <= int64_t(max_blocks) * block_size, "row ", b,
               " has length ", seq_lens[b], " outside [1, ", int64_t(max_blocks) * block_size, "]");
    for (int i = 0; i < (seq_lens[b] + block_size - 1) / block_size; ++i)
      HONE_CHECK(block_tables[int64_t(b) * max_blocks + i] >= 0, "row ", b, " has a negative block at entry ", i);
  }
  const int group = Hq / Hkv;
  int64_t work = 0;
  for (int b = 0; b < B; ++b) work += int64_t(seq_lens[b]) * Hq * D;
  const bool parallel = work > (int64_t(1) << 22);
#pragma omp parallel if (parallel)
  {
    std::vector<float> p, acc(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 4)
    for (int64_t bh = 0; bh < int64_t(B) * Hq; ++bh) {
      const int b = int(bh / Hq), h = int(bh % Hq), g = h / group, n = seq_lens[b];
      const int32_t* table = block_tables + int64_t(b) * max_blocks;
      auto row_of = [&](int j) {  // element offset of token j, kv head g
        return ((int64_t(table[j / block_size]) * Hkv + g) * block_size + j % block_size) * D;
      };
      if (p.size() < size_t(n)) p.resize(static_cast<size_t>(n));
      const float* qi = q + (int64_t(b) * Hq + h) * D;
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n; ++j) {
        const float* kj = k_pool + row_of(j);
        float s = 0.f;
        for (int d = 0; d < D; ++d) s += qi[d] * kj[d];
        const float sc = scale * s;
        p[size_t(j)] = sc;
        m = std::max(m, sc);
      }
      double l = 0.0;
      for (int j = 0; j < n; ++j) {
        p[size_t(j)] = std::exp(p[size_t(j)] - m);
        l += p[size_t(j)];
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int j = 0; j < n; ++j) {
        const float pj = p[size_t(j)];
        const float* vj = v_pool + row_of(j);
        for (int d = 0; d < D; ++d) acc[size_t(d)] += pj * vj[d];
      }
      const float inv_l = float(1.0 / l);
      float* o = out + (int64_t(b) * Hq + h) * D;
      for (int d = 0; d < D; ++d) o[d] = acc[size_t(d)] * inv_l;
    }
  }
}

}  // namespace hone::cpu
