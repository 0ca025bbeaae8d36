// Decode attention (fp32 CPU reference): one query row per sequence against that sequence's KV cache slot.
// The arithmetic follows attention_forward's row loop (fp32 scores, max-subtracted exp, sum in double, fp32
// accumulation of p_j v_j, one multiply by 1/l), so a decoded token sees the same attention as in a packed forward.
#include <vector>

#include "ops/cpu/decode_attention_row.h"
#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {

void attention_decode_forward(float* out, const float* q, const float* k_cache, const float* v_cache,
                              const int32_t* slots, const int32_t* lens, int B, int max_len, int Hq, int Hkv, int D,
                              float scale) {
  HONE_CHECK(Hkv > 0 && Hq % Hkv == 0, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);
  HONE_CHECK(B >= 0 && max_len > 0 && D > 0, "bad decode attention shape B=", B, " max_len=", max_len, " D=", D);
  for (int b = 0; b < B; ++b) {
    HONE_CHECK(lens[b] >= 1 && lens[b] <= max_len, "sequence ", b, " has cache length ", lens[b],
               " outside [1, ", max_len, "]");
    HONE_CHECK(!slots || slots[b] >= 0, "sequence ", b, " has a negative cache slot ", slots ? slots[b] : 0);
  }
  const int group = Hq / Hkv;
  int64_t work = 0;
  for (int b = 0; b < B; ++b) work += int64_t(lens[b]) * Hq * D;
  const bool parallel = work > (int64_t(1) << 22);  // threads pay off only for long caches and big batches
#pragma omp parallel if (parallel)
  {
    // Per-thread scratch kept across calls: the decode loop calls this once per layer and step.
    thread_local std::vector<float> p, acc;
    if (p.size() < size_t(max_len)) p.resize(size_t(max_len));
    if (acc.size() < size_t(D)) acc.resize(size_t(D));
#pragma omp for schedule(dynamic, 4)
    for (int64_t bh = 0; bh < int64_t(B) * Hq; ++bh) {
      const int b = int(bh / Hq), h = int(bh % Hq), g = h / group, n = lens[b];
      const int64_t slot = slots ? slots[b] : b;
      const int64_t base = slot * max_len * Hkv * D;
      auto row_of = [&](int j) { return base + (int64_t(j) * Hkv + g) * D; };
      decode_attention_row(out + (int64_t(b) * Hq + h) * D, q + (int64_t(b) * Hq + h) * D, k_cache, v_cache, n, D,
                           scale, row_of, p.data(), acc.data());
    }
  }
}

}  // namespace hone::cpu
