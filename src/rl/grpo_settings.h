// The deck keys the GRPO loop reads, gathered once from the Config into plain typed fields, with the checks of
// key combinations that only the loop knows (batch divisibility by the rank count, parallel sizes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generation/sampler.h"
#include "model/recompute.h"
#include "rl/advantages.h"
#include "rl/policy_loss.h"
#include "runtime/rank_grid.h"
#include "train/adamw.h"
#include "train/lr_schedule.h"

namespace hone {
class Config;
}

namespace hone::rl {

struct GrpoSettings {
  // [run]
  std::string run_name;
  uint64_t seed = 0;
  int64_t max_steps = 0;
  bool resume = false;
  bool cuda = false;  // run.device = "cuda"
  // [grpo]
  int64_t prompts_per_step = 0;   // P
  int64_t generations = 0;        // G
  AdvantageOptions advantages;
  bool dynamic_sampling = false;
  int64_t dynamic_max_batches = 1;
  bool overlong_filtering = false;
  // [loss]
  PolicyLossConfig loss;
  bool skip_prev_logprobs_on_policy = true;
  double moe_aux_loss_coef = -1;  // loss.moe_aux_loss_coef; < 0 until resolved: the model's router_aux_loss_coef
  bool router_replay = false;     // loss.router_replay
  // [generation]
  SamplingParams sampling;
  int64_t max_new_tokens = 0;
  int64_t max_total_sequence_length = 0;
  std::vector<std::string> stop_strings;
  std::vector<int64_t> stop_token_ids;
  bool ignore_eos = false;
  double kv_cache_gib = 0;               // 0: kv_cache_memory_fraction of the free memory
  double kv_cache_memory_fraction = 0.3;
  int kv_block_size = 16;
  bool cuda_graphs = true;
  bool keep_graphs = true;  // the decode graphs and the cache's addresses kept from step to step
  int generation_tp = 1;  // generation.tp resolved (parallel.tp when 0)
  std::string generation_experts = "auto";  // generation.experts: auto, replicated or parallel
  // [train]
  LrSchedule lr;
  AdamWConfig adamw;
  double max_grad_norm = 0;
  int64_t max_nonfinite_updates = 3;  // skipped (non-finite) updates in a row that end the run; 0: never
  int64_t global_batch_size = 0;  // rollouts per optimizer step (0 in the deck resolves to P * G)
  int64_t max_tokens_per_microbatch = 0;
  Recompute recompute = Recompute::none;  // train.recompute (train.activation_recompute = true: full)
  bool distributed_optimizer = false;
  bool sequence_parallel = true;  // parallel.sequence_parallel (under parallel.tp > 1)
  bool tp_comm_overlap = false;   // parallel.tp_comm_overlap
  int tp_comm_overlap_chunks = 4;  // parallel.tp_comm_overlap_chunks
  bool grad_reduce_in_fp32 = true;
  bool optimizer_offload = false;
  bool offload_during_generation = false;
  // [parallel]
  int tp = 1, pp = 1, vpp = 1;
  std::vector<int64_t> pp_layers;  // parallel.pp_layers (empty: an even split)
  double nccl_timeout_s = 600;
  // [checkpoint]
  int64_t checkpoint_every = 0;
  bool checkpoint_at_exit = true;
  bool checkpoint_hf_folder = true;  // checkpoint.hf_folder
  bool checkpoint_bf16 = true;       // checkpoint.dtype = "bfloat16" (the hf/ folder's weights)
  // [output]
  int64_t sample_every = 0;          // 0 also when output.rollouts = "none"
  int64_t num_samples = 0;
  bool all_rollouts = false;         // output.rollouts = "all"
  bool overwrite = false;

  int64_t rollouts_per_step() const { return prompts_per_step * generations; }
  // Optimizer steps per GRPO step.
  int64_t optimizer_steps_per_step() const { return rollouts_per_step() / global_batch_size; }
  // Exactly on-policy: one optimizer step per GRPO step and the switch on; the previous-policy pass is skipped.
  bool skip_prev_logprobs() const { return skip_prev_logprobs_on_policy && optimizer_steps_per_step() == 1; }
};

// Reads the settings and checks them against the data-parallel size dp. UserError naming the keys on a mismatch:
// parallel.ep other than 1, a rank count that does not divide num_prompts_per_step, a global batch
// that does not divide the step's rollouts or is not a multiple of dp, a micro-batch budget smaller than the
// longest sequence.
GrpoSettings read_grpo_settings(const Config& c, int dp);

// The rank grid of a run on world_size ranks from the deck's [parallel] section. UserError when parallel.ep is not
// 1 (not supported yet), when tp, the pipeline split or generation.tp does not fit the model (before the rank count
// is looked at), and when generation.tp does not divide the ranks.
RankGrid read_rank_grid(const Config& c, int world_size);

}  // namespace hone::rl
