// The model passes of GPU generation over a paged KV cache, and the device buffers they use:
//   prefill: the packed forward of the training path (layer_forward: cuDNN attention over cu_seqlens) for the
//            tokens of newly admitted sequences; each layer's K (after q/k norm and RoPE) and V go to the paged pools
//            with kv_append; logits only for the rows the caller gathers (each sequence's last position).
//   decode:  one token per running sequence: the same layer body with paged_attention_decode_forward as its attention,
//            optionally replayed from a CUDA graph captured per batch-size bucket.
//   sample:  the fused sampler and the stop checks over the logits rows, results copied to pinned host memory.
// The weights are read through the device pointer given at construction, so a refit that writes them in place is
// seen by later passes and by graphs captured before it.
// Memory between GRPO steps (keep_graphs, on by default): the KV pools and the pass buffers are two ranges of
// virtual device memory (cuda/virtual_device_buffer.h). release() gives their physical memory back to the device
// (training uses it) but keeps the addresses, the sizes and the captured decode graphs; resume() maps fresh memory
// at the same addresses, so the next step replays the graphs without capturing them again. Nothing a graph reads
// needs to survive: every pass writes its inputs, activations and KV entries before reading them, and resume()
// zeroes the dummy block again. Off (keep_graphs = false, or a device without virtual memory management), release()
// frees everything and drops the graphs, and the next step allocates and captures anew.
// Under tensor parallelism (a GpuTensorParallel given) the weights are this rank's shard: the pools hold this rank's
// KV heads, the layer body reduces over the group, and the logits rows are gathered whole on every rank (so every
// rank samples the same tokens and runs the same schedule). Guarded by HONE_CUDA.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cuda/generation_ops.h"
#include "cuda/virtual_device_buffer.h"
#include "model/transformer.h"
#include "model/model_config.h"

namespace hone {

template <typename B>
class TensorParallelGroup;
using GpuTensorParallel = TensorParallelGroup<CudaBackend>;

// Host description of one decode step (rows in the order the caller chose: a shared-prefix group's rows first and
// consecutive, rows outside groups after them).
struct DecodeBatch {
  int B = 0;
  std::vector<int32_t> tokens, positions, slots, seq_lens;  // [B]
  std::vector<int32_t> block_tables;                        // [B, max_blocks]
  std::vector<int32_t> group_offsets;                       // [num_groups + 1] (empty when no group)
  std::vector<int32_t> prefix_lens;                         // [num_groups]
  int max_seq_len = 0;
};

// Per-row inputs of the sampler and the stop check.
struct SampleRows {
  int R = 0;
  std::vector<int32_t> sample_index, position, gen_len, seq_len, max_new;  // [R]
};

class ExpertLockstep;
struct CudaBackend;
template <typename B>
class ExpertParallelGroup;
using GpuExpertParallel = ExpertParallelGroup<CudaBackend>;

class GpuGenerationForward {
 public:
  // tp: null for the whole model; else this rank's shard (layout: the shard's), and tp outlives this object.
  // keep_graphs: release() keeps the addresses and the graphs (above); under tp only while NCCL does not register
  // graph-captured buffers (NCCL_GRAPH_REGISTER=0, which NcclComm sets unless the environment chose): a registered
  // buffer is mapped by the peers, and their mapping would outlive release().
  // ep and lockstep (a mixture of experts with its experts split in generation, parallel/expert_lockstep.h): the
  // weights hold this rank's experts (layout: ep's), every prefill and decode step is collective over the
  // expert-parallel group (a vote, then the sparse layers' exchanges) and runs eagerly (the exchange's counts go
  // through the host); finish() runs idle passes until the group is done. Both outlive this object.
  GpuGenerationForward(const ModelConfig& config, const ParamLayout& layout, const cuda::bf16* weights,
                       const cuda::GpuContext& ctx, GpuTensorParallel* tp = nullptr, bool keep_graphs = true,
                       GpuExpertParallel* ep = nullptr, ExpertLockstep* lockstep = nullptr);
  ~GpuGenerationForward();
  GpuGenerationForward(const GpuGenerationForward&) = delete;
  GpuGenerationForward& operator=(const GpuGenerationForward&) = delete;

  // Bytes of one KV block (K and V of every layer) of kv_heads heads (this rank's).
  static int64_t block_bytes(const ModelConfig& c, int block_size, int kv_heads);
  int64_t block_bytes(int block_size) const { return block_bytes(c_, block_size, shape_.kv_heads); }
  GpuTensorParallel* tensor_parallel() const { return tp_; }
  // The paged pools: num_blocks blocks plus one zeroed block that padding rows of a graph read.
  void allocate_cache(int num_blocks, int block_size);
  bool has_cache() const { return num_blocks_ > 0 && !suspended_; }
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int dummy_block() const { return num_blocks_; }

  // Buffers for up to max_rows sequences per step, block tables of max_blocks, and prefills of up to
  // max_prefill_tokens tokens. Reallocating drops the captured graphs.
  void reserve(int max_rows, int max_blocks, int max_prefill_tokens, int max_stop_ids);
  int max_blocks() const { return max_blocks_; }

  // Packed prefill of S sequences (T tokens): K/V to slots[t]; logits rows r = 0..R-1 from packed row gather[r].
  void prefill(const std::vector<int32_t>& tokens, const std::vector<int32_t>& positions,
               const std::vector<int32_t>& slots, const std::vector<int32_t>& cu_seqlens, int max_seqlen,
               const std::vector<int32_t>& gather);
  // Copy-on-write of partial prompt blocks, in every layer's pools (after the prefill that filled the sources).
  void copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& copies);
  // One decode step; logits rows 0..B-1. use_graph: replay (capturing first if needed) the bucket's graph (never
  // with the experts split).
  void decode(const DecodeBatch& batch, bool use_graph);
  // With the experts split, after this rank's last pass of a generation call: idle passes (no rows of its own, its
  // experts computing the group's) until every rank of the group is done; needs reserve()'s buffers. Collective.
  // Returns the idle passes it ran (-1 without a lockstep).
  int64_t finish();
  bool splits_experts() const { return lockstep_ != nullptr; }

  // Samples a token for logits rows 0..R-1 and checks the stop rules; results in tokens()/logprobs()/done()
  // (host, valid after the call returns: it synchronizes the stream).
  void sample(const SampleRows& rows, const cuda::GpuSamplingParams& p, uint64_t seed, uint32_t step, int max_total,
              const std::vector<int32_t>& stop_ids);
  const int32_t* tokens() const { return h_tokens_; }
  const float* logprobs() const { return h_logprobs_; }
  const int32_t* done() const { return h_done_; }

  // Mixture of experts: the experts each row of the last prefill (its packed rows) or decode step was routed to,
  // [rows, routing_width()] (sparse layers x k), in pinned host memory valid once sample() returned. Null for a dense
  // model.
  const int32_t* routing() const { return h_routing_; }
  int routing_width() const { return routing_width_; }

  int64_t graph_replays() const { return graph_replays_; }
  int64_t graph_captures() const { return graph_captures_; }
  void drop_graphs();

  // After the generation phase. Keeping (keeps_graphs()): the physical memory of the pools and buffers goes back to
  // the device; addresses, sizes and graphs stay until resume(). Otherwise as release_all(). Synchronizes the stream.
  void release();
  void release_all();  // frees the pools, buffers and graphs
  bool keeps_graphs() const { return keep_; }
  bool suspended() const { return suspended_; }  // released with the layout kept
  // Maps the pools and buffers of a kept release() again, at their addresses and sizes (the cache holds
  // num_blocks() blocks as before). When the device has no room for them now (on any rank of a tensor-parallel
  // group: collective there), frees everything as release_all() does and returns false: the caller sizes anew.
  bool resume();

 private:
  struct Graph;
  // One range of the generator's device memory: virtual (its physical memory can be given back and mapped again at
  // the same address) or plain device memory.
  class Region {
   public:
    char* allocate(size_t bytes, bool virtual_memory, const char* what);  // frees what it held first
    char* data() const { return vmm_.reserved() ? static_cast<char*>(vmm_.data()) : plain_.get(); }
    bool is_virtual() const { return vmm_.reserved(); }
    void unmap() { vmm_.unmap(); }
    bool try_map() { return vmm_.try_map(); }
    void free();

   private:
    cuda::VirtualDeviceBuffer vmm_;
    DeviceArray<char> plain_;
  };
  class PrefillAttention;  // the layer body's attention seam in prefill: packed attention, K/V to the pools
  class PagedAttention;    // in decode: K/V to the pools, attention over each row's cached blocks
  // Device pointer layout of the decode inputs for `rows` rows (fixed per reserve(): graphs read these).
  struct DecodeInputs {
    int32_t* tokens = nullptr, *positions = nullptr, *slots = nullptr, *seq_lens = nullptr, *block_tables = nullptr;
    int32_t* group_offsets = nullptr, *prefix_lens = nullptr;
  };
  void decode_layers(int B, const cuda::PagedDecodeArgs& args);
  void embed(cuda::bf16* out, const int32_t* tokens, int T);
  void lm_head_logits(const cuda::bf16* h, int R);
  void download_routing(int rows);  // the record's first rows to the pinned host copy (asynchronous)
  // Whether release() can keep the layout here (see the constructor); says why not at debug level.
  static bool can_keep_graphs(const GpuTensorParallel* tp);
  void allocate_buffers();
  void zero_dummy_blocks();
  void idle_pass();
  static int64_t align_ints(int64_t n) { return (n + 63) / 64 * 64; }  // int32 counts to 256-byte multiples
  int upload_decode_inputs(const DecodeBatch& batch, int Bg, int G);
  void decode_graph(int Bg, const cuda::PagedDecodeArgs& args);
  cuda::bf16* k_pool(int l) const;
  cuda::bf16* v_pool(int l) const;
  size_t workspace_bytes() const;

  const ModelConfig c_;
  GpuTensorParallel* const tp_;
  ExpertLockstep* const lockstep_;
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ParamLayout layout_;
  const cuda::bf16* w_;
  const cuda::GpuContext ctx_;
  std::unique_ptr<LayerFeedForward<CudaBackend>> feed_forward_;
  CudaBackend::Exec exec() const { return {&ctx_, nullptr}; }
  DeviceArray<float> inv_freq_;  // allocated once: graphs read it, release() keeps it
  const bool keep_;
  bool suspended_ = false;

  // KV pools: [L][K|V][num_blocks + 1, Hkv, block_size, D].
  Region kv_mem_;
  int num_blocks_ = 0, block_size_ = 16;

  int max_rows_ = 0, max_blocks_ = 0, max_prefill_ = 0, max_stop_ = 0;
  // The pass buffers below, carved from one region (allocate_buffers()).
  Region buf_mem_;
  // Decode: activations for max_rows rows (one layer at a time), residual ping-pong, final norm output.
  LayerActivations<CudaBackend> dec_act_;
  LayerScratch<CudaBackend> dec_scratch_;
  cuda::bf16* dec_x_[2] = {nullptr, nullptr};
  cuda::bf16* dec_h_ = nullptr;
  float* dec_rstd_ = nullptr;
  // Prefill: activations for max_prefill tokens, residual ping-pong, gathered rows.
  LayerActivations<CudaBackend> pre_act_;
  LayerScratch<CudaBackend> pre_scratch_;
  cuda::bf16* pre_x_[2] = {nullptr, nullptr};
  cuda::bf16* pre_g_ = nullptr, *pre_h_ = nullptr;
  float* pre_rstd_ = nullptr;
  float* logits_ = nullptr;  // [max_rows, V]
  // Inputs: one int32 device buffer and its pinned host twin, uploaded once per step.
  int32_t* d_in_ = nullptr;
  int32_t* h_in_ = nullptr;
  int64_t in_size_ = 0;
  DecodeInputs din_;
  int64_t off_sample_ = 0, off_prefill_ = 0, off_stop_ = 0, off_copy_ = 0;
  // Outputs: tokens, logprobs, done on the device, and pinned host copies.
  char* d_out_ = nullptr;
  char* h_out_ = nullptr;
  int32_t* h_tokens_ = nullptr, *h_done_ = nullptr;
  float* h_logprobs_ = nullptr;

  // Mixture of experts: every sparse layer's forward records its rows' experts in routing_d_, copied to the host
  // after each pass.
  int routing_width_ = 0;
  int32_t* routing_d_ = nullptr;  // in the buffers' region: the decode graphs write there
  int32_t* h_routing_ = nullptr;

  std::map<int, Graph*> graphs_;  // by bucket size
  void* graph_scratch_ = nullptr;  // the kernel scratch pointer the graphs were captured with
  int64_t graph_replays_ = 0, graph_captures_ = 0;
};

// Batch-size buckets of the decode graphs: 1, 2, 4, ..., capped at max_rows (which is always a bucket).
int decode_bucket(int B, int max_rows);

}  // namespace hone

#endif  // HONE_CUDA
