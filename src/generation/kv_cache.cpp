// The CPU KV cache (layout in kv_cache.h).
#include "generation/kv_cache.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {

void KvCache::reshape(int num_layers, int num_slots, int max_len, int Hkv, int D) {
  HONE_CHECK(num_layers >= 0 && num_slots >= 0 && max_len > 0 && Hkv > 0 && D > 0, "bad KV cache shape: layers ",
             num_layers, ", slots ", num_slots, ", max_len ", max_len, ", Hkv ", Hkv, ", D ", D);
  num_layers_ = num_layers;
  num_slots_ = num_slots;
  max_len_ = max_len;
  row_ = int64_t(Hkv) * D;
  const size_t n = size_t(int64_t(num_layers) * layer_stride());
  if (k_.size() < n) {
    k_.resize(n);
    v_.resize(n);
  }
}

void KvCache::copy_prefix(int src, int dst, int len) {
  HONE_CHECK(src >= 0 && src < num_slots_ && dst >= 0 && dst < num_slots_ && len >= 0 && len <= max_len_,
             "bad KV prefix copy: slot ", src, " -> ", dst, ", ", len, " tokens");
  if (src == dst || len == 0) return;
  const int64_t n = int64_t(len) * row_;
  for (int l = 0; l < num_layers_; ++l) {
    std::copy_n(k_row(l, src, 0), n, k_row(l, dst, 0));
    std::copy_n(v_row(l, src, 0), n, v_row(l, dst, 0));
  }
}

}  // namespace hone
