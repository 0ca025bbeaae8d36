// What a rank's roles report after a step besides their results: the routing statistics of a mixture of experts,
// the memory each phase held at its peak, and what the parallel layouts and generation's tail cost. The step's
// metrics (rl/grpo_trainer_metrics.cpp) read them. Plain header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generation/generation_tail.h"

namespace hone::roles {

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

}  // namespace hone::roles

namespace hone::rl {
using roles::EngineMemory;
using roles::EngineStepStats;
using roles::MoeStepStats;
}  // namespace hone::rl
