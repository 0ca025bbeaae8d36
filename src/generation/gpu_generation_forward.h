// The model passes of GPU generation over a paged KV cache, and the device buffers they use:
//   prefill: the packed forward of the training path (gpu_layer_forward: cuDNN attention over cu_seqlens) for the
//            tokens of newly admitted sequences; each layer's K (after q/k norm and RoPE) and V go to the paged pools
//            with kv_append; logits only for the rows the caller gathers (each sequence's last position).
//   decode:  one token per running sequence: the same layer body with paged_attention_decode_forward as its attention,
//            optionally replayed from a CUDA graph captured per batch-size bucket.
//   sample:  the fused sampler and the stop checks over the logits rows, results copied to pinned host memory.
// The weights are read through the device pointer given at construction, so a refit that writes them in place is
// seen by later passes and by graphs captured before it.
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
#include "model/gpu_transformer.h"
#include "model/model_config.h"

namespace hone {

class GpuTensorParallel;

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

class GpuGenerationForward {
 public:
  // tp: null for the whole model; else this rank's shard (layout: the shard's), and tp outlives this object.
  GpuGenerationForward(const ModelConfig& config, const ParamLayout& layout, const cuda::bf16* weights,
                       const cuda::GpuContext& ctx, GpuTensorParallel* tp = nullptr);
  ~GpuGenerationForward();
  GpuGenerationForward(const GpuGenerationForward&) = delete;
  GpuGenerationForward& operator=(const GpuGenerationForward&) = delete;

  // Bytes of one KV block (K and V of every layer) of kv_heads heads (this rank's).
  static int64_t block_bytes(const ModelConfig& c, int block_size, int kv_heads);
  int64_t block_bytes(int block_size) const { return block_bytes(c_, block_size, shape_.kv_heads); }
  GpuTensorParallel* tensor_parallel() const { return tp_; }
  // The paged pools: num_blocks blocks plus one zeroed block that padding rows of a graph read.
  void allocate_cache(int num_blocks, int block_size);
  bool has_cache() const { return num_blocks_ > 0; }
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
  // One decode step; logits rows 0..B-1. use_graph: replay (capturing first if needed) the bucket's graph.
  void decode(const DecodeBatch& batch, bool use_graph);

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
  void drop_graphs();
  void release();  // frees the pools, buffers and graphs

 private:
  struct Graph;
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
  void allocate_activations();
  void allocate_io();
  int upload_decode_inputs(const DecodeBatch& batch, int Bg, int G);
  void decode_graph(int Bg, const cuda::PagedDecodeArgs& args);
  cuda::bf16* k_pool(int l) const;
  cuda::bf16* v_pool(int l) const;
  size_t workspace_bytes() const;

  const ModelConfig c_;
  GpuTensorParallel* const tp_;
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ParamLayout layout_;
  const cuda::bf16* w_;
  const cuda::GpuContext ctx_;
  std::unique_ptr<GpuLayerFeedForward> feed_forward_;
  DeviceArray<float> inv_freq_;

  // KV pools: [L][K|V][num_blocks + 1, Hkv, block_size, D].
  DeviceArray<cuda::bf16> pool_;
  int num_blocks_ = 0, block_size_ = 16;

  int max_rows_ = 0, max_blocks_ = 0, max_prefill_ = 0, max_stop_ = 0;
  // Decode: activations for max_rows rows (one layer at a time), residual ping-pong, final norm output.
  DeviceArray<char> dec_mem_;
  GpuLayerActivations dec_act_;
  GpuLayerScratch dec_scratch_;
  cuda::bf16* dec_x_[2] = {nullptr, nullptr};
  cuda::bf16* dec_h_ = nullptr;
  float* dec_rstd_ = nullptr;
  // Prefill: activations for max_prefill tokens, residual ping-pong, gathered rows.
  DeviceArray<char> pre_mem_;
  GpuLayerActivations pre_act_;
  GpuLayerScratch pre_scratch_;
  cuda::bf16* pre_x_[2] = {nullptr, nullptr};
  cuda::bf16* pre_g_ = nullptr, *pre_h_ = nullptr;
  float* pre_rstd_ = nullptr;
  DeviceArray<float> logits_;  // [max_rows, V]
  // Inputs: one int32 device buffer and its pinned host twin, uploaded once per step.
  DeviceArray<int32_t> d_in_;
  int32_t* h_in_ = nullptr;
  int64_t in_size_ = 0;
  DecodeInputs din_;
  int64_t off_sample_ = 0, off_prefill_ = 0, off_stop_ = 0, off_copy_ = 0;
  // Outputs: tokens, logprobs, done on the device, and pinned host copies.
  DeviceArray<char> d_out_;
  char* h_out_ = nullptr;
  int32_t* h_tokens_ = nullptr, *h_done_ = nullptr;
  float* h_logprobs_ = nullptr;

  // Mixture of experts: every sparse layer's forward records its rows' experts in routing_d_, copied to the host
  // after each pass.
  int routing_width_ = 0;
  DeviceArray<int32_t> routing_d_;
  int32_t* h_routing_ = nullptr;

  std::map<int, Graph*> graphs_;  // by bucket size
  void* graph_scratch_ = nullptr;  // the kernel scratch pointer the graphs were captured with
  int64_t graph_replays_ = 0;
};

// Batch-size buckets of the decode graphs: 1, 2, 4, ..., capped at max_rows (which is always a bucket).
int decode_bucket(int B, int max_rows);

}  // namespace hone

#endif  // HONE_CUDA
