// The model passes of generation over a paged KV cache, written once over a backend B, and the buffers they use:
//   prefill: the packed forward of the training path (layer_forward: packed attention over cu_seqlens) for the
//            tokens of newly admitted sequences; each layer's K (after q/k norm and RoPE) and V go to the paged pools
//            with B::kv_append; logits only for the rows the caller gathers (each sequence's last position).
//   decode:  one token per running sequence: the same layer body with B::paged_attention_decode_forward as its
//            attention; on the GPU replayed from a CUDA graph captured per batch-size bucket (B::DecodeSteps).
//   sample:  B's sampler and stop checks over the logits rows, results copied to host staging (pinned on the GPU).
// The weights are read through the pointer given at construction, so a refit that writes them in place is seen by
// later passes and by graphs captured before it.
// Memory between GRPO steps (keep_graphs, on by default): on the GPU the KV pools and the pass buffers are two
// ranges of virtual device memory (B::GenerationRegion). release() gives their physical memory back to the device
// (training uses it) but keeps the addresses, the sizes and the captured decode graphs; resume() maps fresh memory at
// the same addresses, so the next step replays the graphs without capturing them again. Nothing a graph reads needs
// to survive: every pass writes its inputs, activations and KV entries before reading them, and resume() zeroes the
// dummy block again. Otherwise (the CPU, keep_graphs = false, or a device without virtual memory management)
// release() frees everything, and the next step allocates (and on the GPU captures) anew.
// Under tensor parallelism (a TensorParallelGroup<B> given) the weights are this rank's shard: the pools hold this
// rank's KV heads, the layer body reduces over the group, and the logits rows are gathered whole on every rank (so
// every rank samples the same tokens and runs the same schedule).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "backend/generation_memory.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "ops/sampling_params.h"

namespace hone {

template <typename B>
class TensorParallelGroup;
template <typename B>
class ExpertParallelGroup;
class ExpertLockstep;

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

template <typename B>
class GenerationForward {
 public:
  using A = typename B::Act;
  using Exec = typename B::Exec;
  // tp: null for the whole model; else this rank's shard (layout: the shard's), and tp outlives this object.
  // keep_graphs: release() keeps the addresses and the graphs (above) where the backend can
  // (B::generation_keeps_addresses).
  // ep and lockstep (a mixture of experts with its experts split in generation, parallel/expert_lockstep.h): the
  // weights hold this rank's experts (layout: ep's), every prefill and decode step is collective over the
  // expert-parallel group (a vote, then the sparse layers' exchanges) and runs eagerly (the exchange's counts go
  // through the host); finish() runs idle passes until the group is done. Both outlive this object, as does the
  // Exec's context.
  GenerationForward(const ModelConfig& config, const ParamLayout& layout, const A* weights, const Exec& x,
                    TensorParallelGroup<B>* tp = nullptr, bool keep_graphs = true,
                    ExpertParallelGroup<B>* ep = nullptr, ExpertLockstep* lockstep = nullptr);
  ~GenerationForward();
  GenerationForward(const GenerationForward&) = delete;
  GenerationForward& operator=(const GenerationForward&) = delete;

  // Bytes of one KV block (K and V of every layer) of kv_heads heads (this rank's).
  static int64_t block_bytes(const ModelConfig& c, int block_size, int kv_heads);
  int64_t block_bytes(int block_size) const { return block_bytes(c_, block_size, shape_.kv_heads); }
  TensorParallelGroup<B>* tensor_parallel() const { return tp_; }
  const Exec& exec() const { return x_; }
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
  // One decode step; logits rows 0..B-1. use_graph: replay (capturing first if needed) the bucket's graph (where
  // the backend has graphs, and never with the experts split).
  void decode(const DecodeBatch& batch, bool use_graph);
  // With the experts split, after this rank's last pass of a generation call: idle passes (no rows of its own, its
  // experts computing the group's) until every rank of the group is done; needs reserve()'s buffers. Collective.
  // Returns the idle passes it ran (-1 without a lockstep).
  int64_t finish();
  bool splits_experts() const { return lockstep_ != nullptr; }

  // Samples a token for logits rows 0..R-1 and checks the stop rules; results in tokens()/logprobs()/done()
  // (host, valid after the call returns: it waits for the backend).
  void sample(const SampleRows& rows, const SamplingParams& p, uint64_t seed, uint32_t step, int max_total,
              const std::vector<int32_t>& stop_ids);
  const int32_t* tokens() const { return h_tokens_; }
  const float* logprobs() const { return h_logprobs_; }
  const int32_t* done() const { return h_done_; }
  // The logits rows of the last prefill or decode [rows, V], fp32 in B's memory (what sample() reads).
  const float* logits() const { return logits_; }

  // Mixture of experts: the experts each row of the last prefill (its packed rows) or decode step was routed to,
  // [rows, routing_width()] (sparse layers x k), in host staging valid once sample() returned. Null for a dense
  // model.
  const int32_t* routing() const { return h_routing_.get(); }
  int routing_width() const { return routing_width_; }

  int64_t graph_replays() const { return steps_.replays(); }
  int64_t graph_captures() const { return steps_.captures(); }

  // After the generation phase. Keeping (keeps_graphs()): the physical memory of the pools and buffers goes back to
  // the device; addresses, sizes and graphs stay until resume(). Otherwise as release_all(). Waits for the backend.
  void release();
  void release_all();  // frees the pools, buffers and graphs
  bool keeps_graphs() const { return keep_; }
  bool suspended() const { return suspended_; }  // released with the layout kept
  // Maps the pools and buffers of a kept release() again, at their addresses and sizes (the cache holds
  // num_blocks() blocks as before). When the device has no room for them now (on any rank of a tensor-parallel
  // group: collective there), frees everything as release_all() does and returns false: the caller sizes anew.
  bool resume();

 private:
  class PrefillAttention;  // the layer body's attention seam in prefill: packed attention, K/V to the pools
  class PagedAttention;    // in decode: K/V to the pools, attention over each row's cached blocks
  // Pointer layout of the decode inputs for `rows` rows (fixed per reserve(): graphs read these).
  struct DecodeInputs {
    int32_t* tokens = nullptr, *positions = nullptr, *slots = nullptr, *seq_lens = nullptr, *block_tables = nullptr;
    int32_t* group_offsets = nullptr, *prefix_lens = nullptr;
  };
  void decode_layers(int rows, const PagedDecodeArgs& args);
  void embed(A* out, const int32_t* tokens, int T);
  void lm_head_logits(const A* h, int R);
  void download_routing(int rows);  // the record's first rows to the host staging (asynchronous)
  void allocate_buffers();
  void zero_dummy_blocks();
  void idle_pass();
  void drop_graphs() { steps_.drop(); }
  static int64_t align_ints(int64_t n) { return (n + 63) / 64 * 64; }  // int32 counts to 256-byte multiples
  int upload_decode_inputs(const DecodeBatch& batch, int Bg, int G);
  A* k_pool(int l) const;
  A* v_pool(int l) const;
  size_t workspace_bytes() const;

  const ModelConfig c_;
  TensorParallelGroup<B>* const tp_;
  ExpertLockstep* const lockstep_;
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ParamLayout layout_;
  const A* w_;
  const Exec x_;
  std::unique_ptr<LayerFeedForward<B>> feed_forward_;
  typename B::template Array<float> inv_freq_;  // allocated once: graphs read it, release() keeps it
  const bool keep_;
  bool suspended_ = false;

  // KV pools: [L][K|V][num_blocks + 1, Hkv, block_size, D].
  typename B::GenerationRegion kv_mem_;
  int num_blocks_ = 0, block_size_ = 16;

  int max_rows_ = 0, max_blocks_ = 0, max_prefill_ = 0, max_stop_ = 0;
  // The pass buffers below, carved from one region (allocate_buffers()).
  typename B::GenerationRegion buf_mem_;
  // Decode: activations for max_rows rows (one layer at a time), residual ping-pong, final norm output.
  LayerActivations<B> dec_act_;
  LayerScratch<B> dec_scratch_;
  A* dec_x_[2] = {nullptr, nullptr};
  A* dec_h_ = nullptr;
  float* dec_rstd_ = nullptr;
  // Prefill: activations for max_prefill tokens, residual ping-pong, gathered rows.
  LayerActivations<B> pre_act_;
  LayerScratch<B> pre_scratch_;
  A* pre_x_[2] = {nullptr, nullptr};
  A* pre_g_ = nullptr, *pre_h_ = nullptr;
  float* pre_rstd_ = nullptr;
  float* logits_ = nullptr;  // [max_rows, V]
  // Inputs: one int32 buffer and its host staging twin, uploaded once per step.
  int32_t* d_in_ = nullptr;
  typename B::template HostStaging<int32_t> h_in_;
  int64_t in_size_ = 0;
  DecodeInputs din_;
  int64_t off_sample_ = 0, off_prefill_ = 0, off_stop_ = 0, off_copy_ = 0;
  // Outputs: tokens, logprobs, done in the backend's memory, and their host staging.
  char* d_out_ = nullptr;
  typename B::template HostStaging<char> h_out_;
  int32_t* h_tokens_ = nullptr, *h_done_ = nullptr;
  float* h_logprobs_ = nullptr;

  // Mixture of experts: every sparse layer's forward records its rows' experts in routing_d_, copied to the host
  // after each pass.
  int routing_width_ = 0;
  int32_t* routing_d_ = nullptr;  // in the buffers' region: the decode graphs write there
  typename B::template HostStaging<int32_t> h_routing_;

  typename B::DecodeSteps steps_;  // by bucket size
};

// Batch-size buckets of the decode graphs: 1, 2, 4, ..., capped at max_rows (which is always a bucket).
int decode_bucket(int B, int max_rows);

}  // namespace hone
