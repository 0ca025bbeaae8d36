// The device memory of GPU generation (see gpu_generation_forward.h): the KV pools and the pass buffers, their
// sizing and carving, and how they are given back between GRPO steps: freed with the graphs, or (keep_graphs) only
// their physical memory, the addresses and the captured decode graphs kept for the next step.
#include "generation/gpu_generation_forward.h"

#if HONE_CUDA

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/carver.h"
#include "cuda/check.h"
#include "model/moe_feed_forward.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone {

using cuda::bf16;

// ---- Region ------------------------------------------------------------------------------------------------------

char* GpuGenerationForward::Region::allocate(size_t bytes, bool virtual_memory, const char* what) {
  free();
  if (!virtual_memory) {
    plain_ = DeviceArray<char>(int64_t(bytes), what);
    return plain_.get();
  }
  vmm_.reserve(bytes, what);
  try {
    vmm_.map();
  } catch (...) {
    vmm_.release();
    throw;
  }
  return static_cast<char*>(vmm_.data());
}

void GpuGenerationForward::Region::free() {
  plain_ = DeviceArray<char>();
  vmm_.release();
}

// ---- sizing ------------------------------------------------------------------------------------------------------

bool GpuGenerationForward::can_keep_graphs(const GpuTensorParallel* tp) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  // Keeping is an optimization: a driver that cannot answer leaves generation as it was, not failing.
  bool vmm = false;
  std::string why;
  try {
    vmm = cuda::VirtualDeviceBuffer::supported(device);
  } catch (const Error& e) {
    why = cat(" (", e.what(), ")");
  }
  if (!vmm) {
    log_debug("generation.keep_graphs: device ", device, " has no virtual memory management", why,
              "; the decode graphs are captured again every step");
    return false;
  }
  if (tp) {
    const char* reg = std::getenv("NCCL_GRAPH_REGISTER");
    if (!reg || std::strcmp(reg, "0") != 0) {
      log_debug("generation.keep_graphs: NCCL_GRAPH_REGISTER is ", reg ? reg : "unset", " (not 0): NCCL may map ",
                "the buffers of captured collectives on the peers, so the decode graphs are captured again every step");
      return false;
    }
  }
  return true;
}

void GpuGenerationForward::allocate_cache(int num_blocks, int block_size) {
  HONE_CHECK(num_blocks > 0 && block_size > 0, "bad KV cache ", num_blocks, " x ", block_size);
  HONE_CHECK(!suspended_, "allocate_cache() after a kept release(): resume() or release_all() first");
  if (ctx_.stream) CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // the old pools may still be read
  drop_graphs();
  num_blocks_ = 0;
  max_rows_ = max_blocks_ = max_prefill_ = max_stop_ = 0;  // the copy region depends on num_blocks: re-reserve
  const int64_t block_elems = int64_t(shape_.kv_heads) * block_size * c_.head_dim;
  const int64_t elems = 2 * int64_t(c_.num_hidden_layers) * (int64_t(num_blocks) + 1) * block_elems;
  kv_mem_.allocate(size_t(elems) * sizeof(bf16), keep_, "KV cache");
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  zero_dummy_blocks();
}

// The dummy block (index num_blocks) of every pool holds zeros: padding rows of a graph read it.
void GpuGenerationForward::zero_dummy_blocks() {
  const int64_t block_elems = int64_t(shape_.kv_heads) * block_size_ * c_.head_dim;
  const size_t bytes = size_t(block_elems) * sizeof(bf16);
  for (int l = 0; l < c_.num_hidden_layers; ++l) {
    CUDA_CHECK(cudaMemsetAsync(k_pool(l) + int64_t(num_blocks_) * block_elems, 0, bytes, ctx_.stream));
    CUDA_CHECK(cudaMemsetAsync(v_pool(l) + int64_t(num_blocks_) * block_elems, 0, bytes, ctx_.stream));
  }
}

void GpuGenerationForward::reserve(int max_rows, int max_blocks, int max_prefill_tokens, int max_stop_ids) {
  HONE_CHECK(has_cache(), "allocate the KV cache before the buffers");
  HONE_CHECK(max_rows > 0 && max_blocks > 0 && max_prefill_tokens > 0, "bad generation buffer sizes");
  if (max_rows <= max_rows_ && max_blocks <= max_blocks_ && max_prefill_tokens <= max_prefill_ &&
      max_stop_ids <= max_stop_)
    return;
  // Larger buffers move: the graphs, which baked in the old addresses, go (and are captured again as needed).
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
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
// final norms, logits, the int32 inputs and the sampler's outputs; plus the pinned host twins of inputs and outputs.
void GpuGenerationForward::allocate_buffers() {
  const int R = max_rows_, C = c_.hidden_size, Tp = max_prefill_;
  // Inputs: decode region (graphs read it), sampler region, prefill region, stop ids, block copies.
  const int64_t MB = max_blocks_;
  const int64_t A = align_ints(R);
  off_sample_ = 4 * A + align_ints(int64_t(R) * MB) + align_ints(R + 1) + A;
  off_prefill_ = off_sample_ + 5 * A;
  off_stop_ = off_prefill_ + 3 * align_ints(Tp) + align_ints(R + 1) + align_ints(R);
  off_copy_ = off_stop_ + align_ints(max_stop_);
  in_size_ = off_copy_ + 2 * align_ints(int64_t(num_blocks_) + 1);
  const size_t out_bytes = size_t(3 * A * 4);
  // Mixture of experts: every sparse layer's forward records its rows' experts (decode and prefill rows).
  MoeFeedForward<CudaBackend>* moe = dynamic_cast<MoeFeedForward<CudaBackend>*>(feed_forward_.get());
  routing_width_ = moe ? moe->num_sparse_layers() * c_.num_experts_per_tok : 0;
  const size_t routing_bytes = size_t(std::max(R, Tp)) * size_t(routing_width_) * sizeof(int32_t);

  auto carve = [&](char* base) {
    cuda::Carver cv{base};
    const size_t dec_act = carve_layer_activations(dec_act_, nullptr, shape_, R);
    carve_layer_activations(dec_act_, cv.take_bytes(dec_act), shape_, R);
    const size_t dec_scr = carve_layer_forward_scratch(dec_scratch_, nullptr, shape_, R);
    carve_layer_forward_scratch(dec_scratch_, cv.take_bytes(dec_scr), shape_, R);
    dec_x_[0] = cv.take<bf16>(int64_t(R) * C);
    dec_x_[1] = cv.take<bf16>(int64_t(R) * C);
    dec_h_ = cv.take<bf16>(int64_t(R) * C);
    dec_rstd_ = cv.take<float>(R);

    const size_t pre_act = carve_layer_activations(pre_act_, nullptr, shape_, Tp);
    carve_layer_activations(pre_act_, cv.take_bytes(pre_act), shape_, Tp);
    const size_t pre_scr = carve_layer_forward_scratch(pre_scratch_, nullptr, shape_, Tp);
    carve_layer_forward_scratch(pre_scratch_, cv.take_bytes(pre_scr), shape_, Tp);
    pre_x_[0] = cv.take<bf16>(int64_t(Tp) * C);
    pre_x_[1] = cv.take<bf16>(int64_t(Tp) * C);
    pre_g_ = cv.take<bf16>(int64_t(R) * C);
    pre_h_ = cv.take<bf16>(int64_t(R) * C);
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
  din_.positions = d + A;
  din_.slots = d + 2 * A;
  din_.seq_lens = d + 3 * A;
  din_.block_tables = d + 4 * A;
  din_.group_offsets = din_.block_tables + align_ints(int64_t(R) * MB);
  din_.prefix_lens = din_.group_offsets + align_ints(R + 1);

  if (h_in_) CUDA_CHECK(cudaFreeHost(h_in_));
  h_in_ = nullptr;
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_in_), size_t(in_size_) * sizeof(int32_t)));
  std::memset(h_in_, 0, size_t(in_size_) * sizeof(int32_t));
  if (h_out_) CUDA_CHECK(cudaFreeHost(h_out_));
  h_out_ = nullptr;
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_out_), out_bytes));
  h_tokens_ = reinterpret_cast<int32_t*>(h_out_);
  h_logprobs_ = reinterpret_cast<float*>(h_out_ + A * 4);
  h_done_ = reinterpret_cast<int32_t*>(h_out_ + 2 * A * 4);
  if (h_routing_) CUDA_CHECK(cudaFreeHost(h_routing_));
  h_routing_ = nullptr;
  if (moe) CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_routing_), routing_bytes));
}

// ---- between steps -----------------------------------------------------------------------------------------------

void GpuGenerationForward::release() {
  if (suspended_) return;
  if (!keep_ || !has_cache() || max_rows_ == 0 || !kv_mem_.is_virtual() || !buf_mem_.is_virtual()) {
    release_all();
    return;
  }
  // Nothing queued may still read the memory when it goes.
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  try {
    kv_mem_.unmap();
    buf_mem_.unmap();
  } catch (...) {
    release_all();  // never leave a layout whose memory is half gone
    throw;
  }
  suspended_ = true;
}

bool GpuGenerationForward::resume() {
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

void GpuGenerationForward::release_all() {
  if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
  drop_graphs();
  graph_scratch_ = nullptr;
  suspended_ = false;
  num_blocks_ = 0;
  max_rows_ = max_blocks_ = max_prefill_ = max_stop_ = 0;
  logits_ = nullptr;
  d_in_ = nullptr;
  d_out_ = nullptr;
  if (h_in_) cudaFreeHost(h_in_);
  if (h_out_) cudaFreeHost(h_out_);
  if (h_routing_) cudaFreeHost(h_routing_);
  h_in_ = nullptr;
  h_out_ = nullptr;
  h_routing_ = nullptr;
  routing_d_ = nullptr;
  h_tokens_ = h_done_ = nullptr;
  h_logprobs_ = nullptr;
  kv_mem_.free();
  buf_mem_.free();
}

}  // namespace hone

#endif  // HONE_CUDA
