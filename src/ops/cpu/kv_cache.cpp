// The paged KV cache's data movers and generation's stop check on the CPU: the fp32 references of cuda/'s kv_append,
// kv_copy_blocks and check_stops (cuda/generation_ops.h), with the same signatures and the same pool layout
// pool[num_blocks, Hkv, block_size, D].
#include <algorithm>
#include <cstring>

#include "ops/ops.h"

namespace hone::cpu {

void kv_append(float* k_pool, float* v_pool, const float* k, const float* v, const int32_t* slot_mapping, int T,
               int Hkv, int D, int block_size, int64_t ldv) {
  const int64_t row = int64_t(Hkv) * D, vrow = ldv ? ldv : row;
  for (int t = 0; t < T; ++t) {
    const int32_t slot = slot_mapping[t];
    if (slot < 0) continue;
    const int64_t block = slot / block_size, offset = slot % block_size;
    for (int h = 0; h < Hkv; ++h) {
      const int64_t dst = ((block * Hkv + h) * block_size + offset) * D;
      std::memcpy(k_pool + dst, k + t * row + int64_t(h) * D, size_t(D) * sizeof(float));
      std::memcpy(v_pool + dst, v + t * vrow + int64_t(h) * D, size_t(D) * sizeof(float));
    }
  }
}

void kv_copy_blocks(float* k_pool, float* v_pool, const int32_t* src, const int32_t* dst, int n, int Hkv, int D,
                    int block_size) {
  const int64_t per_block = int64_t(Hkv) * block_size * D;
  for (int i = 0; i < n; ++i) {
    std::memcpy(k_pool + dst[i] * per_block, k_pool + src[i] * per_block, size_t(per_block) * sizeof(float));
    std::memcpy(v_pool + dst[i] * per_block, v_pool + src[i] * per_block, size_t(per_block) * sizeof(float));
  }
}

void check_stops(int32_t* done, const int32_t* tokens, const int32_t* gen_len, const int32_t* seq_len,
                 const int32_t* max_new, int max_total, const int32_t* stop_ids, int n_stop, int B) {
  for (int b = 0; b < B; ++b) {
    if (std::find(stop_ids, stop_ids + n_stop, tokens[b]) != stop_ids + n_stop) done[b] = 1;
    else if (gen_len[b] + 1 >= max_new[b] || seq_len[b] + 1 >= max_total) done[b] = 2;
    else done[b] = 0;
  }
}

}  // namespace hone::cpu
