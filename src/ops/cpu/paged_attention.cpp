// Decode attention over a paged KV cache (fp32 CPU reference of cuda/generation_ops.h's paged decode): the
// arithmetic of attention_decode_forward (fp32 scores, max-subtracted exp, sum in double, fp32 accumulation of
// p_j v_j, one multiply by 1/l); only the address of token j changes (block table lookup).
#include <vector>

#include "ops/cpu/decode_attention_row.h"
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
      decode_attention_row(out + (int64_t(b) * Hq + h) * D, q + (int64_t(b) * Hq + h) * D, k_pool, v_pool, n, D,
                           scale, row_of, p.data(), acc.data());
    }
  }
}

}  // namespace hone::cpu
