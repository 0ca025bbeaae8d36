// What one GRPO step carries from phase to phase on this rank (private to the grpo_trainer_*.cpp files).
#pragma once

#include <cstdint>
#include <vector>

#include "rl/grpo_trainer.h"
#include "rl/policy_loss.h"

namespace hone::rl {

struct GrpoTrainer::StepState {
  int64_t step = 0;
  std::vector<data::Prompt> prompts;      // this rank's prompts that produced kept groups (by GrpoSample::prompt_index)
  std::vector<GrpoSample> samples;  // kept groups, G consecutive samples each
  bool scored = false;              // rewards already computed (dynamic sampling scores while generating)

  // Generation.
  int64_t batches = 0;               // generation batches drawn
  int64_t groups_generated = 0;      // local, before dynamic-sampling drops
  int64_t groups_zero_variance = 0;  // local
  int64_t groups_kept_global = 0;
  int64_t prompts_too_long = 0;      // local
  int64_t prompt_tokens = 0;         // local, each kept prompt once
  int64_t generated_tokens_all = 0;  // local, every generated sample (dropped groups included): the phase's work
  // The micro-batches of each optimizer step (pack_micro_batches): the logprob phase writes the old and reference
  // logprobs into them, the training phase trains on them.
  std::vector<std::vector<MicroBatch>> chunks;
  int64_t packed_tokens = 0, packed_slots = 0;
  // Logprob.
  int64_t logprob_tokens = 0;
  // Training.
  PolicyLossMetrics loss;
  double entropy_sum = 0;
  int64_t optimizer_steps = 0;    // optimizer steps taken, applied or skipped
  int64_t skipped_updates = 0;    // of them, skipped for a non-finite gradient norm
  double grad_norm_sum = 0;       // over the applied ones
  double lr = 0;
  int64_t training_tokens = 0;
  int64_t microbatches = 0;
};

}  // namespace hone::rl
