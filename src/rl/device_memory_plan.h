// What one GPU rank of `hone run` must hold beyond its bf16 weights, phase by phase, counted before the optimizer
// is allocated so that a run that cannot fit ends at once with the numbers and the deck keys that change them,
// instead of a failed allocation minutes later. The counts are lower bounds (no library workspaces, no CUDA
// graphs, the activations of a micro-batch of exactly train.max_tokens_per_microbatch tokens): a refusal is
// certain to be right.
//
// Under tensor parallelism a rank holds its shard of every parameter (parallel/shard_layout.h), so the fp32
// gradients, master weights and Adam moments are counted for the shard, not the model: num_params is the largest
// shard of the tp ranks; under pipeline parallelism the largest of every stage's shards. The activations are the
// caller's count for this rank: per token of this rank's rows (a micro-batch's tokens / cp under context
// parallelism) for each recompute choice, so that a refusal can name the cheapest change that fits: the distributed
// optimizer, then train.recompute = selective (elementwise ops rerun), then full (the layers' forward rerun), then
// more GPUs (parallel.cp for the activations, parallel.tp for everything). A generation layout of its own
// (generation.tp, parallel/generation_layout.h) adds the replica's bf16 copy of every layer and the refit's staging;
// with train.offload_during_generation the Adam moments and the training bf16 weights leave the device while
// generation runs.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "model/recompute.h"

namespace hone {
struct ModelConfig;
class PipelineLayout;
}

namespace hone::rl {

struct DeviceMemoryPlan {
  int64_t num_params = 0;     // parameters this rank holds: its tensor-parallel shard (the whole policy at tp = 1)
  int tp = 1;                 // tensor-parallel ranks the policy is split over (parallel.tp)
  int next_tp = 0;            // the next larger parallel.tp the model allows within one node; 0: none
  int dp = 1;                 // ranks the optimizer state is sharded over under ZeRO-1: dp (x cp under context
                              // parallelism: the optimizer's group)
  int cp = 1;                 // context-parallel ranks a micro-batch's tokens are split over (parallel.cp)
  bool distributed = false;   // the optimizer state is sharded over dp (ZeRO-1)
  bool offload = false;       // train.optimizer_offload: the Adam moments leave the device during generation
  bool offload_during_generation = false;  // the moments and, with a generation copy, the training weights leave
  double training_weights = 0;   // bf16 training weights (on the device when the free memory is measured)
  double generation_copy = 0;    // bf16 generation weights of their own (+ refit staging); 0: generation shares
  int generation_tp = 0;         // the generation replicas' size, when generation_copy > 0
  int next_generation_tp = 0;    // a larger generation.tp the model allows within one node; 0: none
  // Under expert parallelism with generation.experts = replicated: generation's bf16 copy of every expert, loaded
  // with the weights (so in neither phase's count: the free memory is measured with it on the device); a refusal
  // then offers generation.experts = parallel, which gives it back.
  double expert_replica = 0;
  double activations = 0;     // bytes of the training arenas for one micro-batch (this rank's rows)
  int64_t microbatch_tokens = 0;
  double kv_cache = 0;        // bytes of the KV cache when its size is fixed (generation.kv_cache_gib); 0 otherwise
  // The recompute choice of the run (train.recompute), and the training arenas' bytes per token of this rank's rows
  // under each choice (indexed by Recompute; 0: unknown, not suggested). activations is then
  // per_token[recompute] x this rank's tokens.
  Recompute recompute = Recompute::none;
  std::array<double, 3> per_token{};

  // fp32 master weights and two Adam moments: this rank's shard, or everything.
  double optimizer_state() const;
  double gradients() const { return 4.0 * double(num_params); }
  double training() const { return optimizer_state() + gradients() + activations + generation_copy; }
  // Sets per_token and activations from the arenas' bytes for `tokens` of this rank's rows under each choice.
  void set_activations(const std::array<double, 3>& bytes, int64_t tokens);
  // The gradient buffer is released while generation runs.
  double generation() const;
};

// Fills tp, num_params (the largest of the tp ranks' shards of c; of every pipeline stage's with pipe; with 1/ep of
// the experts under expert parallelism) and next_tp. UserError of layer_shape when tp (or ep) does not divide the
// model.
void set_tensor_parallel(DeviceMemoryPlan& plan, const ModelConfig& c, int tp, const PipelineLayout* pipe = nullptr,
                         int ep = 1);
// Fills generation_copy (the bf16 whole model / tg and the refit's staging, bounded by reshard rounds),
// generation_tp, next_generation_tp and training_weights, for a generation layout of its own (same_as_training
// false); leaves them 0 otherwise.
void set_generation_layout(DeviceMemoryPlan& plan, const ModelConfig& c, int tg, bool same_as_training);
// Fills expert_replica: the bf16 copy of every expert of this rank's tensor-parallel shard that generation holds
// under expert parallelism (ep > 1) when it replicates the experts; 0 otherwise (a dense model, ep = 1, or the
// experts split in generation).
void set_expert_replica(DeviceMemoryPlan& plan, const ModelConfig& c, int tp, int ep, bool replicated);

// Empty when the plan fits in `free_bytes` (the device memory free once the weights are on it); else the message
// of the refusal: every number and what to change.
std::string device_memory_refusal(const DeviceMemoryPlan& plan, double free_bytes);

}  // namespace hone::rl
