// The CPU key/value cache of generation: for every layer, K and V of every cached token, one contiguous slot per
// sequence. Layout per layer (the layout attention_decode_forward reads):
//   k[layer] = [num_slots, max_len, Hkv, D],  v[layer] likewise;  token p of the sequence in slot s is row
//   s * max_len + p. K is stored after the q/k norm and RoPE, exactly as attention consumes it.
// Capacity is num_slots x max_len tokens (a wave's batch slots x max_total_sequence_length). Storage only grows:
// resizing to a smaller shape reuses it, so a generator called every step allocates once.
#pragma once

#include <cstdint>
#include <vector>

namespace hone {

class KvCache {
 public:
  // Shapes the cache for num_slots x max_len tokens of num_layers layers with Hkv heads of size D.
  // Contents are unspecified afterwards (every position is written before it is read).
  void reshape(int num_layers, int num_slots, int max_len, int Hkv, int D);

  int num_layers() const { return num_layers_; }
  int num_slots() const { return num_slots_; }
  int max_len() const { return max_len_; }
  int64_t row_size() const { return row_; }  // Hkv * D floats per token

  float* k(int layer) { return k_.data() + layer * layer_stride(); }
  float* v(int layer) { return v_.data() + layer * layer_stride(); }
  const float* k(int layer) const { return k_.data() + layer * layer_stride(); }
  const float* v(int layer) const { return v_.data() + layer * layer_stride(); }
  // Where token `pos` of slot `slot` lives in layer `layer` (Hkv * D floats).
  float* k_row(int layer, int slot, int pos) { return k(layer) + (int64_t(slot) * max_len_ + pos) * row_; }
  float* v_row(int layer, int slot, int pos) { return v(layer) + (int64_t(slot) * max_len_ + pos) * row_; }

  // Copies the first `len` tokens of slot `src` to slot `dst` in every layer (a group's shared prompt).
  void copy_prefix(int src, int dst, int len);

  // Bytes in use for the current shape (K and V, all layers).
  int64_t bytes() const { return 2 * int64_t(num_layers_) * layer_stride() * int64_t(sizeof(float)); }

 private:
  int64_t layer_stride() const { return int64_t(num_slots_) * max_len_ * row_; }

  int num_layers_ = 0, num_slots_ = 0, max_len_ = 0;
  int64_t row_ = 0;
  std::vector<float> k_, v_;
};

}  // namespace hone
