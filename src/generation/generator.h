// The generation engine, written once over a backend B: prompts in, rollouts out (completion tokens, their generation
// logprobs, why each stopped). Continuous batching over a paged KV cache (scheduler.h, kv_block_manager.h) with
// preemption by recompute; a GRPO group's prompt prefilled once and its KV blocks shared by the group's samples; the
// passes are GenerationForward<B>'s (generation_forward.h): on the CPU in fp32 host memory, run as they are called;
// on the GPU in bf16 with decode attention that can read a shared prefix once per group and decode steps replayed
// from CUDA graphs.
//
// Reproducibility: the token at completion position p of the request with global sample index s is drawn with
// philox_uniform(seed, step, s, p), so a completion depends only on (weights, prompt, seed, step, s), never on the
// other requests, their order, the batch or the number of ranks (up to the rounding of the batch's arithmetic). The
// recorded logprob is log_softmax(logits / temperature)[token] over the full vocabulary (what training recomputes).
//
// Stop rules (stop_conditions.h) after each token: a stop token id, a stop string in the decoded completion (needs
// the decode callback; matched on the host), max_new_tokens (the request's own when it has one); and the sequence
// never grows beyond max_total_sequence_length tokens (prompt + completion; finish reason `length`).
//
// The weights are the buffer given at construction (the ParamLayout layout), the one refit writes in place: every
// generate() sees the current weights, and captured graphs stay valid across refits. The KV cache is sized at the
// first generate() (kv_cache_gib; else on the GPU a fraction of the free device memory then, on the CPU what the
// call's sequences need at most) and kept until release(), which the trainer calls before training so the cache and
// training activations never coexist. With keep_graphs on the GPU, release() gives back only the memory: the next
// generate() maps the cache (same size) and the buffers again at the same addresses and replays the decode graphs
// captured before (generation_forward.h). Design: doc/generation.md, doc/generation-gpu.md.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "generation/generation_progress.h"
#include "generation/generation_tail.h"
#include "generation/rollout.h"
#include "generation/sampler.h"
#include "generation/stop_conditions.h"
#include "model/model_config.h"
#include "model/param_table.h"

namespace hone {

template <typename B>
class GenerationForward;
template <typename B>
class TensorParallelGroup;
template <typename B>
class ExpertParallelGroup;
class ExpertLockstep;
class ShardLayout;
struct ModelWeights;

struct GenerationOptions {
  double kv_cache_gib = 0;                 // KV cache size; 0: the backend's default (above)
  double kv_cache_memory_fraction = 0.3;   // GPU: of the device memory free at the start of the first generate()
  int block_size = 16;                     // tokens per KV block
  int max_num_seqs = 512;                  // sequences running at once (decode batch)
  int max_prefill_tokens = 16384;          // tokens per prefill pass (one longer sequence still runs alone)
  bool cuda_graphs = true;                 // GPU: replay decode steps from graphs captured per batch-size bucket
  bool keep_graphs = true;                 // GPU: release() keeps addresses and graphs for the next generate()
  bool shared_prefix = true;               // share a group's prompt blocks in the KV cache (one copy a group)
  // GPU: decode attention reads a group's shared blocks once for the group (the shared-prefix path) instead of once
  // per row through the plain path, whose rows of a group run side by side and find those blocks in L2: the plain
  // path is the faster one at every shape measured (doc/performance.md), so this is off but for comparisons.
  bool prefix_attention = false;
};

// Totals of the last generate() call.
struct GenerationStats {
  int64_t sequences = 0;
  int64_t prefill_tokens = 0;    // tokens run through prefills (a group's shared prompt counts once)
  int64_t generated_tokens = 0;  // completion tokens sampled
  int64_t decode_steps = 0;      // batched decode passes
  int64_t waves = 0;             // prefill passes (sequences admitted together)
  int64_t peak_kv_bytes = 0;     // most KV blocks in use at once, in bytes (K and V, all layers)
  double prefill_seconds = 0, decode_seconds = 0;  // each includes its sampling and stop checks
  GenerationTail tail;  // the call's wall time, tokens/s, its last 10 % of sequences, batch occupancy
  int64_t cuda_graph_replays = 0;   // GPU: decode steps replayed from a graph
  int64_t cuda_graph_captures = 0;  // GPU: decode graphs captured (0 when every bucket's graph was kept from before)
  int64_t preemptions = 0;          // sequences sent back to the queue for lack of KV blocks
  int64_t kv_capacity_tokens = 0;   // blocks x block size
  int64_t shared_prefix_rows = 0;   // decode rows (summed over steps) that read their prompt through a shared group
  int64_t prefill_passes = 0;
};

template <typename B>
class Generator {
 public:
  using A = typename B::Act;
  // `weights`: this rank's weights in B's memory (layout's offsets); must outlive the generator, like the Exec's
  // context. Under tensor parallelism, tp (outliving the generator too) and the shard's layout and weights: every
  // rank of the group calls generate() with the same requests and gets the same rollouts.
  // With ep and its lockstep (the experts split in generation: parallel/expert_lockstep.h), the layout and weights
  // hold this rank's experts, each rank of the expert-parallel group generates its own requests (none is fine), and
  // generate() returns when every rank of the group is done; decode steps run without CUDA graphs.
  Generator(const ModelConfig& config, const ParamLayout& layout, const A* weights, const typename B::Exec& x,
            GenerationOptions options = {}, TensorParallelGroup<B>* tp = nullptr, ExpertParallelGroup<B>* ep = nullptr,
            ExpertLockstep* lockstep = nullptr);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // One rollout per request, in request order. Throws UserError for an empty prompt, a token id outside the
  // vocabulary, a prompt that leaves no room under max_total_sequence_length, or bad sampling/stop settings.
  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step,
                                int max_total_sequence_length, const DecodeFunction& decode = {});
  // Gives the memory of the KV cache and buffers back. With keep_graphs (where the backend can) their addresses and
  // the decode graphs stay for the next generate(); otherwise everything is freed and allocated again then.
  void release();

  const GenerationStats& stats() const { return stats_; }
  // Called after every pass of later generate() calls (empty: none).
  void set_progress(GenerationProgressFn fn) { progress_ = std::move(fn); }

 private:
  void prepare_cache(const GenerationOptions& call, int64_t sequences, int max_len, const StopCriteria& stop);

  const ModelConfig config_;
  GenerationOptions options_;
  std::unique_ptr<GenerationForward<B>> fwd_;
  GenerationStats stats_;
  GenerationProgressFn progress_;
};

// B's generator over `weights` (this rank's shard in `layout`; outliving the generator, as does the Exec's context)
// with `options` (the deck's KV cache and CUDA graph settings), at most B::kMaxDecodeRows sequences at once
// (options.max_num_seqs fewer).
template <typename B>
std::unique_ptr<Generator<B>> make_generator(const ModelConfig& config, const ShardLayout& layout,
                                             typename B::Act* weights, const typename B::Exec& x,
                                             GenerationOptions options, TensorParallelGroup<B>* tp,
                                             ExpertParallelGroup<B>* ep, ExpertLockstep* lockstep);

// A CPU generator over fp32 ModelWeights (their flat buffer; tests and tools that hold weights so).
std::unique_ptr<Generator<CpuBackend>> make_cpu_generator(const ModelConfig& config, const ModelWeights& weights,
                                                                 GenerationOptions options = {},
                                                                 TensorParallelGroup<CpuBackend>* tp = nullptr,
                                                                 ExpertParallelGroup<CpuBackend>* ep = nullptr,
                                                                 ExpertLockstep* lockstep = nullptr);

}  // namespace hone
