// The CPU generation engine: prompts in, rollouts out (completion tokens, their generation logprobs, why each
// stopped). Batched: prompts are prefilled together in one packed forward, then every unfinished sequence decodes
// one token per step against its KV cache slot (CachedForward, KvCache). Requests with the same prompt in a wave
// (the G samples of a GRPO group) share one prefill: the prompt's K and V are copied into each sample's slot.
//
// Reproducibility: the token at completion position p of the request with global sample index s is drawn with
// philox_uniform(seed, step, s, p), so a completion depends only on (weights, prompt, seed, step, s), never on the
// other requests, their order, the wave size or the number of ranks. The recorded logprob is
// log_softmax(logits / temperature)[token] over the full vocabulary (what training recomputes).
//
// Stop rules (stop_conditions.h) after each token: a stop token id, a stop string in the decoded completion (needs
// the decode callback), max_new_tokens (the request's own when it has one); and the sequence never grows beyond
// max_total_sequence_length tokens (prompt + completion; finish reason `length`). Rules and layout: doc/generation.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu_backend.h"
#include "generation/cached_forward.h"
#include "generation/generator_of.h"
#include "generation/rollout.h"
#include "generation/generation_progress.h"
#include "generation/generation_tail.h"
#include "generation/kv_cache.h"
#include "generation/sampler.h"
#include "generation/stop_conditions.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace hone {

struct GenerationOptions {
  int max_batch = 256;  // sequences decoded together (one wave); bounds the KV cache to max_batch slots
};

// Totals of the last generate() call.
struct GenerationStats {
  int64_t sequences = 0;
  int64_t prefill_tokens = 0;    // prompt tokens run through the model (a shared group prompt counts once)
  int64_t generated_tokens = 0;  // completion tokens sampled
  int64_t decode_steps = 0;      // batched decode forwards
  int64_t waves = 0;
  int64_t peak_kv_bytes = 0;     // largest KV cache in use (K and V, all layers)
  double prefill_seconds = 0, decode_seconds = 0;  // decode includes sampling and stop checks
  GenerationTail tail;  // the call's wall time, tokens/s, its last 10 % of sequences, batch occupancy
  int64_t cuda_graph_replays = 0;   // GPU: decode steps replayed from a graph
  int64_t cuda_graph_captures = 0;  // GPU: decode graphs captured (0 when every bucket's graph was kept from before)
};

class ExpertLockstep;
struct CpuBackend;
template <typename B>
class ExpertParallelGroup;
using ExpertParallel = ExpertParallelGroup<CpuBackend>;
template <typename B>
class TensorParallelGroup;
using TensorParallel = TensorParallelGroup<CpuBackend>;

class CpuGenerator {
 public:
  // The weights are read at every generate() call, so a refit that overwrites them in place is seen; they must
  // outlive the generator (the config is copied).
  // With tp, the weights are this rank's tensor-parallel shard and generate() is collective over tp: every rank
  // of the group runs the same requests and returns the same rollouts.
  // With ep and its lockstep (a mixture of experts with its experts split: parallel/expert_lockstep.h), the weights
  // hold this rank's experts and generate() is collective over the expert-parallel group: each rank generates its
  // own requests, and returns only when every rank of the group is done.
  CpuGenerator(const ModelConfig& config, const ModelWeights& weights, GenerationOptions options = {},
               TensorParallel* tp = nullptr, ExpertParallel* ep = nullptr, ExpertLockstep* lockstep = nullptr);

  // One rollout per request, in request order. Throws UserError for an empty prompt, a token id outside the
  // vocabulary, a prompt that leaves no room under max_total_sequence_length, or bad sampling/stop settings.
  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step,
                                int max_total_sequence_length, const DecodeFunction& decode = {});

  // Nothing to give back: the cache and buffers are reused by the next call (GpuGenerator::release frees its
  // device memory).
  void release() {}

  const GenerationStats& stats() const { return stats_; }
  // Called after every batched pass of later generate() calls (empty: none).
  void set_progress(GenerationProgressFn fn) { progress_ = std::move(fn); }

 private:
  struct Sequence;
  void generate_wave(const std::vector<GenerationRequest>& requests, size_t begin, size_t end,
                     std::vector<Rollout>& out);
  void reshape_cache(const std::vector<GenerationRequest>& requests, size_t begin, size_t end);
  std::vector<int> prefill_distinct_prompts(const std::vector<GenerationRequest>& requests, size_t begin, size_t end);
  std::vector<Sequence> start_sequences(const std::vector<GenerationRequest>& requests, size_t begin, size_t end,
                                        const std::vector<int>& distinct_of, std::vector<Rollout>& out);
  // One batched decode step per token until every sequence of the wave has stopped.
  void decode_until_done(std::vector<Sequence>& seqs, size_t begin, std::vector<Rollout>& out);
  // Samples the next token of `seq` from its logits row and applies the stop rules.
  void take_token(Sequence& seq, Rollout& r, const float* logits_row);
  // After every batched pass: the timeline's mark and the progress hook.
  void end_pass();

  const ModelConfig config_;  // a copy: the caller's may be a temporary
  const ModelWeights weights_;  // views of the caller's buffers (Tensor copies share them)
  GenerationOptions options_;
  CachedForward forward_;
  KvCache cache_;
  GenerationStats stats_;
  GenerationProgressFn progress_;
  int64_t finished_ = 0;  // sequences of the call in progress that have stopped
  std::chrono::steady_clock::time_point call_start_;
  GenerationTimeline timeline_;
  // Settings of the call in progress.
  const SamplingParams* sampling_ = nullptr;
  const StopCriteria* stop_ = nullptr;
  const DecodeFunction* decode_ = nullptr;
  uint64_t seed_ = 0;
  uint32_t step_ = 0;
  int max_total_ = 0;
  // Wave buffers, reused across waves and calls.
  std::vector<float> logits_;
  std::vector<int32_t> tokens_, positions_, slots_, cu_seqlens_, active_;
  std::vector<int32_t> prefill_routing_;  // a mixture of experts: the last prefill's routing rows
};

template <>
struct GeneratorOf<CpuBackend> {
  using type = CpuGenerator;
};
class ShardLayout;
// The CPU's generator over `weights` (fp32, this rank's shard in `layout`; outliving the generator), its waves of
// at most 256 sequences (settings.max_seqs fewer).
std::unique_ptr<CpuGenerator> make_generator(const ModelConfig& config, const ShardLayout& layout, float* weights,
                                             const CpuBackend::Exec&, const GeneratorSettings& settings,
                                             TensorParallel* tp, ExpertParallel* ep, ExpertLockstep* lockstep);

}  // namespace hone
