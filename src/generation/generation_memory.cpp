// The memory of generation over B (see generation_forward.h): the KV pools and the pass buffers, their sizing and
// carving, and how they are given back between GRPO steps: freed with the graphs, or (keep_graphs, where the backend
// keeps addresses) only their physical memory, the addresses and the captured decode graphs kept for the next step.
#include <algorithm>
#include <cstring>

#include "backend/carver.h"
#include "generation/generation_forward.h"
#include "model/moe_feed_forward.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone {

template <typename B>
void GenerationForward<B>::allocate_cache(int num_blocks, int block_size) {
  HONE_CHECK(num_blocks > 0 && block_size > 0, "bad KV cache ", num_blocks, " x ", block_size);
  HONE_CHECK(!suspended_, "allocate_cache() after a kept release(): resume() or release_all() first");
  B::sync(x_);  // the old pools may still be read
  drop_graphs();
  num_blocks_ = 0;
  max_rows_ = max_blocks_ = max_prefill_ = max_stop_ = 0;  // the copy region depends on num_blocks: re-reserve
  const int64_t block_elems = int64_t(shape_.kv_heads) * block_size * c_.head_dim;
  const int64_t elems = 2 * int64_t(c_.num_hidden_layers) * (int64_t(num_blocks) + 1) * block_elems;
  kv_mem_.allocate(size_t(elems) * sizeof(A), keep_, "KV cache");
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  zero_dummy_blocks();
}

// The dummy block (index num_blocks) of every pool holds zeros: padding rows of a graph read it.
template <typename B>
void GenerationForward<B>::zero_dummy_blocks() {
  const int64_t block_elems = int64_t(shape_.kv_heads) * block_size_ * c_.head_dim;
  const size_t bytes = size_t(block_elems) * sizeof(A);
  for (int l = 0; l < c_.num_hidden_layers; ++l) {
    B::zero(x_, k_pool(l) + int64_t(num_blocks_) * block_elems, bytes);
    B::zero(x_, v_pool(l) + int64_t(num_blocks_) * block_elems, bytes);
  }
}

template <typename B>
void GenerationForward<B>::reserve(int max_rows, int max_blocks, int max_prefill_tokens, int max_stop_ids) {
  HONE_CHECK(has_cache(), "allocate the KV cache before the buffers");
  HONE_CHECK(max_rows > 0 && max_blocks > 0 && max_prefill_tokens > 0, "bad generation buffer sizes");
  if (max_rows <= max_rows_ && max_blocks <= max_blocks_ && max_prefill_tokens <= max_prefill_ &&
      max_stop_ids <= max_stop_)
    return;
  // Larger buffers move: the graphs, which baked in the old addresses, go (and are captured again as needed).
  B::sync(x_);
  drop_graphs();
  max_rows_ = std::max(max_rows, max_rows_);
  max_blocks_ = std::max(max_blocks, max_blocks_);
  max_prefill_ = std::max(max_prefill_tokens, max_prefill_);
  max_stop_ = std::max({max_stop_ids, max_stop_, 1});
  try {
    allocate_buffers();
  } catch (...) {
    max_rows_ = max_blocks_ = max_prefill_ = max_stop_ = 0;  // no buffers: the next reserve() allocates
    throw;
  }
}

// One region for every pass buffer: decode and prefill activations (one layer at a time), residual ping-pongs,
// final norms, logits, the int32 inputs and the sampler's outputs; plus the host staging of inputs and outputs.
template <typename B>
void GenerationForward<B>::allocate_buffers() {
  const int R = max_rows_, C = c_.hidden_size, Tp = max_prefill_;
  // Inputs: decode region (graphs read it), sampler region, prefill region, stop ids, block copies.
  const int64_t MB = max_blocks_;
  const int64_t col = align_ints(R);
  off_sample_ = 4 * col + align_ints(int64_t(R) * MB) + align_ints(R + 1) + col;
  off_prefill_ = off_sample_ + 5 * col;
  off_stop_ = off_prefill_ + 3 * align_ints(Tp) + align_ints(R + 1) + align_ints(R);
  off_copy_ = off_stop_ + align_ints(max_stop_);
  in_size_ = off_copy_ + 2 * align_ints(int64_t(num_blocks_) + 1);
  const size_t out_bytes = size_t(3 * col * 4);
  // Mixture of experts: every sparse layer's forward records its rows' experts (decode and prefill rows).
  MoeFeedForward<B>* moe = dynamic_cast<MoeFeedForward<B>*>(feed_forward_.get());
  routing_width_ = moe ? moe->num_sparse_layers() * c_.num_experts_per_tok : 0;
  const size_t routing_bytes = size_t(std::max(R, Tp)) * size_t(routing_width_) * sizeof(int32_t);

  auto carve = [&](char* base) {
    Carver cv{base, B::kAlignment};
    const size_t dec_act = carve_layer_activations(dec_act_, nullptr, shape_, R);
    carve_layer_activations(dec_act_, cv.take_bytes(dec_act), shape_, R);
    const size_t dec_scr = carve_layer_forward_scratch(dec_scratch_, nullptr, shape_, R);
    carve_layer_forward_scratch(dec_scratch_, cv.take_bytes(dec_scr), shape_, R);
    dec_x_[0] = cv.take<A>(int64_t(R) * C);
    dec_x_[1] = cv.take<A>(int64_t(R) * C);
    dec_h_ = cv.take<A>(int64_t(R) * C);
    dec_rstd_ = cv.take<float>(R);

    const size_t pre_act = carve_layer_activations(pre_act_, nullptr, shape_, Tp);
    carve_layer_activations(pre_act_, cv.take_bytes(pre_act), shape_, Tp);
    const size_t pre_scr = carve_layer_forward_scratch(pre_scratch_, nullptr, shape_, Tp);
    carve_layer_forward_scratch(pre_scratch_, cv.take_bytes(pre_scr), shape_, Tp);
    pre_x_[0] = cv.take<A>(int64_t(Tp) * C);
    pre_x_[1] = cv.take<A>(int64_t(Tp) * C);
    pre_g_ = cv.take<A>(int64_t(R) * C);
    pre_h_ = cv.take<A>(int64_t(R) * C);
    pre_rstd_ = cv.take<float>(R);

    logits_ = cv.take<float>(int64_t(R) * c_.vocab_size);
    d_in_ = cv.take<int32_t>(in_size_);
    d_out_ = cv.take_bytes(out_bytes);
    routing_d_ = routing_width_ > 0 ? reinterpret_cast<int32_t*>(cv.take_bytes(routing_bytes)) : nullptr;
    return cv.used;
  };
  carve(buf_mem_.allocate(carve(nullptr), keep_, "generation buffers"));  // the old buffers go first
  if (tp_) tp_->reserve_logits(R);

  int32_t* d = d_in_;
  din_.tokens = d;
  din_.positions = d + col;
  din_.slots = d + 2 * col;
  din_.seq_lens = d + 3 * col;
  din_.block_tables = d + 4 * col;
  din_.group_offsets = din_.block_tables + align_ints(int64_t(R) * MB);
  din_.prefix_lens = din_.group_offsets + align_ints(R + 1);

  h_in_ = {};  // the old staging goes first
  h_in_ = typename B::template HostStaging<int32_t>(in_size_, "generation inputs");
  std::memset(h_in_.get(), 0, size_t(in_size_) * sizeof(int32_t));
  h_out_ = {};
  h_out_ = typename B::template HostStaging<char>(int64_t(out_bytes), "generation outputs");
  h_tokens_ = reinterpret_cast<int32_t*>(h_out_.get());
  h_logprobs_ = reinterpret_cast<float*>(h_out_.get() + col * 4);
  h_done_ = reinterpret_cast<int32_t*>(h_out_.get() + 2 * col * 4);
  h_routing_ = {};
  if (moe)
    h_routing_ = typename B::template HostStaging<int32_t>(int64_t(routing_bytes / sizeof(int32_t)),
                                                           "generation routing");
}

// ---- between steps -----------------------------------------------------------------------------------------------

template <typename B>
void GenerationForward<B>::release() {
  if (suspended_) return;
  if (!keep_ || !has_cache() || max_rows_ == 0 || !kv_mem_.is_virtual() || !buf_mem_.is_virtual()) {
    release_all();
    return;
  }
  // Nothing queued may still read the memory when it goes.
  B::sync(x_);
  try {
    kv_mem_.unmap();
    buf_mem_.unmap();
  } catch (...) {
    release_all();  // never leave a layout whose memory is half gone
    throw;
  }
  suspended_ = true;
}

template <typename B>
bool GenerationForward<B>::resume() {
  HONE_CHECK(suspended_, "resume() without a kept release()");
  bool ok = kv_mem_.try_map();
  if (ok && !buf_mem_.try_map()) {
    kv_mem_.unmap();
    ok = false;
  }
  // The ranks of a tensor-parallel group replay their graphs' collectives together: all keep them, or none does.
  if (tp_) ok = tp_->min_over_group(ok ? 1 : 0) == 1;
  suspended_ = false;
  if (!ok) {
    log_debug("generation: no room to map the kept KV cache (", num_blocks_, " blocks) and buffers again; they ",
              "are sized anew and the decode graphs captured again");
    release_all();
    return false;
  }
  zero_dummy_blocks();  // fresh memory: the padding rows' zeros are gone with the old
  return true;
}

template <typename B>
void GenerationForward<B>::release_all() {
  try {
    B::sync(x_);
  } catch (...) {  // freeing goes on: a failed stream is reported by whoever uses it next
  }
  drop_graphs();
  suspended_ = false;
  num_blocks_ = 0;
  max_rows_ = max_blocks_ = max_prefill_ = max_stop_ = 0;
  logits_ = nullptr;
  d_in_ = nullptr;
  d_out_ = nullptr;
  h_in_ = {};
  h_out_ = {};
  h_routing_ = {};
  routing_d_ = nullptr;
  h_tokens_ = h_done_ = nullptr;
  h_logprobs_ = nullptr;
  kv_mem_.free();
  buf_mem_.free();
}

// The members defined here (the class itself is instantiated in generation_forward.cpp).
#define INSTANTIATE(B)                                                    \
  template void GenerationForward<B>::allocate_cache(int, int);           \
  template void GenerationForward<B>::zero_dummy_blocks();                \
  template void GenerationForward<B>::reserve(int, int, int, int);        \
  template void GenerationForward<B>::allocate_buffers();                 \
  template void GenerationForward<B>::release();                          \
  template bool GenerationForward<B>::resume();                           \
  template void GenerationForward<B>::release_all();
HONE_FOR_EACH_BACKEND(INSTANTIATE)
#undef INSTANTIATE

}  // namespace hone
