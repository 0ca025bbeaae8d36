// The rollouts of one GRPO step on this rank (GrpoSample: prompt ids, completion, generation logprobs, rewards,
// advantage) and their packing into micro-batches, once a step for both the logprob and the training phases: the
// old and reference logprobs are written into the micro-batches (MicroBatch::old, ::ref), not kept per sample.
// In a micro-batch, completion token j of a sequence whose prompt has n tokens is predicted at row
// seq_begin + n - 1 + j; prompt tokens are never targets.
#pragma once

#include <cstdint>
#include <vector>

#include "generation/rollout.h"
#include "model/packed_batch.h"
#include "reward/reward.h"
#include "rl/packing.h"
#include "rl/policy_loss.h"

namespace hone::rl {

struct GrpoSample {
  int64_t prompt_index = 0;  // into the step's prompts on this rank
  int64_t position = 0;      // global place in the step's batch (kept group order * G + g): picks its optimizer step
  Rollout rollout;           // prompt ids, completion ids, generation logprobs, finish reason, text
  double reward = 0;
  bool correct = false;
  std::vector<reward::RewardScore> scores;  // the reward's named sub-scores (user rewards; empty for the built-in ones)
  float advantage = 0;
  bool trained = true;                 // loss mask of its tokens (false: truncated under overlong filtering)
  int64_t length() const { return int64_t(rollout.prompt.size() + rollout.completion.size()); }
};

// A packed micro-batch with the per-row arrays policy_loss reads (rows that are not trained carry mask 0).
struct MicroBatch {
  PackedBatch batch;
  std::vector<int64_t> samples;      // sample index of each sequence
  std::vector<int64_t> seq_offsets;  // cu_seqlens as int64
  std::vector<uint8_t> mask;         // [T] 1 where a trained completion token is predicted
  std::vector<float> gen, old, ref;  // [T] logprobs of the predicted token (0 elsewhere); old and ref are 0 until
                                     // the logprob phase writes them (roles::Learner::policy_logprobs)
  std::vector<float> advantages;     // one per sequence
  // Mixture of experts: generation's experts of each row [T x routing_width] (routing_width = sparse layers x k),
  // -1 where generation routed none (a sequence's last token); empty when the rollouts carry no routing.
  std::vector<int32_t> gen_routing;
  int routing_width = 0;
};

// What the loss of one optimizer step needs besides its micro-batches (roles::Learner::train).
struct TrainLoss {
  PolicyLossConfig config;
  double denominator = 0;   // global: loss_denominator summed over the step's micro-batches and ranks (> 0)
  float temperature = 1.f;  // of the generation: training logprobs are those of the tempered policy
  bool on_policy = false;   // exactly on-policy: old = new, detached (the micro-batches' old logprobs are unused)
  // Mixture of experts: the load-balancing loss's weight (loss.moe_aux_loss_coef) and the tokens of the optimizer
  // step's micro-batches summed over ranks; a micro-batch of T tokens adds coef * T / total_tokens times its loss,
  // so that the step's sum is the token-weighted mean of the micro-batches' losses, times coef.
  double moe_aux_loss_coef = 0;
  double total_tokens = 0;
};

// A pass with nothing to learn: one token, no target (what a rank runs when another rank of its expert-parallel
// group has one more micro-batch: roles::Learner::lockstep_group).
PackedBatch empty_pass_batch();

// Packs the samples listed in `which` into micro-batches of at most max_tokens tokens (MFFD, rl/packing.h).
// Returns the sample indices of each micro-batch; *packing (when given) receives the packing for its efficiency.
std::vector<std::vector<int64_t>> pack_samples(const std::vector<GrpoSample>& samples,
                                               const std::vector<int64_t>& which, int64_t max_tokens,
                                               Packing* packing = nullptr);

// Builds one micro-batch (old and ref all 0).
MicroBatch build_micro_batch(const std::vector<GrpoSample>& samples, const std::vector<int64_t>& which);

// Reads the predicted-token values of `row_values` ([T], e.g. Transformer::logprobs()) back per completion token.
std::vector<float> completion_values(const MicroBatch& mb, int seq, const float* row_values,
                                     const std::vector<GrpoSample>& samples);

}  // namespace hone::rl
