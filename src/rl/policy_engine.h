// The model side of a GRPO step behind one interface, so the loop (rl/grpo_trainer_step.cpp) is the same on the
// CPU and on the GPU: generation, logprobs of the policy and the reference, training micro-batches, the optimizer
// step with its data-parallel gradient reduction, refit, and the state a checkpoint holds.
//   cpu:  fp32 weights, Transformer, CpuGenerator; gradients summed over the data-parallel ranks with MPI by
//         DataParallelAdamW, or reduce-scattered by DistributedAdamW (ZeRO-1) (train/distributed_adamw.h).
//   cuda: bf16 compute weights shared by training and generation (refit casts the fp32 master weights into them in
//         place), GpuTransformer, GpuGenerator (paged KV cache); gradients reduced over NCCL while the last
//         micro-batch's backward runs (train/grad_reducer.h) by GpuDataParallelAdamW or GpuDistributedAdamW
//         (ZeRO-1). Colocated: the KV cache is freed before the logprob phase, the activation arenas and the
//         gradient buffer before generation (doc/grpo.md, "Memory on the GPU").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/parallel_state.h"
#include "generation/cpu_generator.h"
#include "generation/generation_progress.h"
#include "model/model_config.h"
#include "model/packed_batch.h"
#include "model/weights.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_settings.h"
#include "rl/policy_loss.h"
#include "tensor/tensor.h"

namespace hone::rl {

// Mixture of experts: the routing of this rank's training passes (micro-batches) since the last take_moe_stats().
struct MoeStepStats {
  int sparse_layers = 0, experts = 0;   // 0: a dense model
  std::vector<double> expert_tokens;    // [sparse_layers x experts] rows this rank routed to each expert
  double aux_loss_sum = 0;              // the load-balancing loss of each training micro-batch, summed
  int64_t aux_count = 0;                // the micro-batches in that sum
  // (token, sparse layer) pairs of generated rollouts whose expert set the training forward compared with
  // generation's, and those whose sets differ.
  int64_t routing_compared = 0, routing_differ = 0;
  // loss.router_replay: the token_mult_prob_error terms (exp |generation - training logprob| of each trained token)
  // of a training forward that routes by itself, run beside the replayed one.
  double unreplayed_mpe_sum = 0;
  int64_t unreplayed_tokens = 0;
};

// Bytes this rank's engine held at the peak of each phase of the last step (its own accounting of what it
// allocated: weights, gradients, optimizer state, KV cache, activation arenas).
struct EngineMemory {
  double generation = 0, logprob = 0, training = 0, refit = 0, idle = 0;
  double device = 0;  // GPU: the driver's count of device memory in use at the fullest point seen (0 on the CPU)
};

// What the parallel layouts cost this rank in the last step (zeros without pipeline or resharding), and the tail
// of its generation calls.
struct EngineStepStats {
  int pipeline_passes = 0;           // training passes (optimizer steps) through the pipeline
  int pipeline_microbatches = 0;     // their micro-batches
  double pipeline_makespan = 0;      // their schedules simulated (parallel/pipeline_simulation.h): time units
  double pipeline_busy = 0;          // ... of which a stage computes (the bubble: 1 - busy / makespan)
  double pipeline_compute_s = 0;     // training passes: time in forwards and backwards
  double pipeline_exchange_s = 0;    // ... and in activation and gradient exchanges (waiting included)
  double refit_bytes = 0;            // received from other ranks by the resharding refit
  double offload_s = 0;              // train.offload_during_generation: moving idle state out and back
  int64_t graph_captures = 0;        // GPU generation: decode CUDA graphs captured (0 once they are kept)
  int64_t graph_replays = 0;         // ... and decode steps replayed from them
  GenerationTail generation;         // the step's generate() calls on this rank, added up
  std::string schedule;              // "1F1B", "interleaved 1F1B (vpp 2)"; empty without pipeline
};

class PolicyEngine {
 public:
  virtual ~PolicyEngine() = default;
  virtual std::string describe() const = 0;  // e.g. "cpu fp32" or "cuda:0 NVIDIA H100 80GB HBM3, bf16"
  virtual void synchronize() {}               // waits for queued device work (phase timers call it)

  // Collective over the data-parallel ranks, once, after every rank built its engine and before the first step:
  // the communicators (the dp group of the engine's ParallelState; on the GPU an NCCL communicator made from it)
  // and the data-parallel optimizer, whose fp32 master weights come from `initial` (the weights the engine was
  // built with). Outside agreed(): it communicates.
  virtual void connect(const ModelWeights& initial) = 0;

  // ---- generation ----
  virtual std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                        const StopCriteria& stop, uint64_t seed, uint32_t step,
                                        int max_total_sequence_length, const DecodeFunction& decode) = 0;
  virtual void end_generation() {}  // frees what generation held (the GPU KV cache)
  // Called after every batched pass of later generate() calls, with the call's progress (empty: none).
  virtual void set_generation_progress(GenerationProgressFn fn) = 0;

  // ---- logprob phase: per-row logprobs of the packed batch (0 where targets < 0), host memory valid until the
  // next call. forced_routing (mixture of experts, loss.router_replay): each row's experts as
  // MicroBatch::gen_routing holds them, replayed instead of the router's choice (null: the router's).
  enum class Role { policy, reference };
  virtual std::span<const float> logprobs(Role role, const PackedBatch& batch, float temperature,
                                          const int32_t* forced_routing = nullptr) = 0;
  // The logprobs of every micro-batch of a pass, on every rank (under pipeline parallelism one forward-only pass
  // through the stages, broadcast from the last). forced_routing: empty, or one entry per batch (each may be null).
  // The default calls logprobs() per batch.
  virtual std::vector<std::vector<float>> logprobs_batches(Role role, const std::vector<const PackedBatch*>& batches,
                                                           float temperature,
                                                           const std::vector<const int32_t*>& forced_routing = {}) {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < batches.size(); ++i) {
      const std::span<const float> lp =
          logprobs(role, *batches[i], temperature, forced_routing.empty() ? nullptr : forced_routing[i]);
      out.emplace_back(lp.begin(), lp.end());
      passes_done(int64_t(i) + 1);  // logprobs() has its values on the host: this pass is done
    }
    return out;
  }

  // ---- training ----
  // One optimizer step's gradient: zeroes the gradients, then per micro-batch the forward (with entropy), the
  // policy loss (the policy_loss op with the loss's global denominator; on the GPU on the device, where the
  // logprobs and their gradients stay) and the backward, accumulating the gradients. On the GPU the last
  // micro-batch's backward reduces the gradients over the data-parallel ranks while it runs. Returns each
  // micro-batch's loss metrics (with its entropy sum over valid tokens), in order. An empty list only zeroes the
  // gradients (the rank still joins optimizer_step()).
  virtual std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& micro_batches,
                                               const TrainLoss& loss) = 0;
  // Collective over the data-parallel ranks: reduce the gradients, clip to max_grad_norm (0: off), one AdamW update
  // with learning rate lr. Returns the global gradient norm before clipping. last_of_step: no other optimizer step
  // follows in this GRPO step, so the new weights reach the forward passes at refit(); otherwise at once (the next
  // micro-batches train on them). Every rank passes the same value.
  virtual double optimizer_step(float lr, double max_grad_norm, bool last_of_step) = 0;
  virtual int optimizer_step_count() const = 0;
  // Collective: the generation weights take the new training weights.
  virtual void refit() = 0;

  virtual EngineMemory memory() const = 0;
  virtual void reset_memory() = 0;  // start of a step (also resets stats())
  virtual EngineStepStats stats() const { return {}; }

  // Expert parallelism: the ranks whose forward passes pair up one for one (a sparse layer's rows cross the
  // expert-parallel group in every pass); null otherwise. The loop then runs as many logprob passes on each of
  // them, an empty pass (empty_pass_batch) where a rank has fewer micro-batches; train() pads its own.
  virtual Comm* lockstep_group() const { return nullptr; }
  // Mixture of experts: the routing statistics of the training passes since the last call (empty for a dense model).
  virtual MoeStepStats take_moe_stats() { return {}; }

  // ---- checkpoints (the dp-independent state: whole weights and moments, whatever the optimizer's sharding) ----
  // Collective over the data-parallel ranks: host copies of the fp32 master weights and the AdamW moments
  // ([num_params] f32 tensors, resized here) on data-parallel rank 0; the other ranks' outputs stay empty.
  virtual void read_state(ModelWeights& master, Tensor& exp_avg, Tensor& exp_avg_sq) = 0;
  // Collective: every rank passes the whole state. Replaces weights (training, generation copies), moments and the
  // optimizer step count.
  virtual void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                           int step_count) = 0;

  // ---- progress (rank 0's progress line: a local call, never a collective) ----
  // Called during train() and logprobs_batches() with how many of the call's micro-batches this rank has finished
  // (counted from its first, so the empty passes of expert parallelism come after its own). Not called under
  // pipeline parallelism, whose schedule interleaves the micro-batches of the stages. Empty: none.
  using PassProgressFn = std::function<void(int64_t done)>;
  void set_pass_progress(PassProgressFn fn) { pass_progress_ = std::move(fn); }

 protected:
  bool wants_pass_progress() const { return bool(pass_progress_); }
  void passes_done(int64_t done) const {
    if (pass_progress_) pass_progress_(done);
  }

 private:
  PassProgressFn pass_progress_;
};

// The engine run.device asks for, built from the initial fp32 weights without communicating (connect() next,
// with the same weights). The engine keeps a reference to ps (which must outlive it) for its communicators.
std::unique_ptr<PolicyEngine> make_cpu_policy_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                     const ModelWeights& initial, const ParallelState& ps);
// Throws UserError in a build without CUDA.
std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                     const ModelWeights& initial, const ParallelState& ps);

}  // namespace hone::rl
