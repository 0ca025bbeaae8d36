// The rollout channel's records in their one wire form (roles/wire.h): a rollout, a scored sample (a rollout with
// its place in the step, reward and sub-scores: what generation hands to training), a reward's result, the record
// of a rollout kept in the output, and a micro-batch's loss metrics. Every move of these between ranks (generation
// replicas to trainers, a replica's reward to its members, the step's rollouts and samples to the output's rank,
// the last pipeline stage's metrics to the others) encodes them here.
#pragma once

#include "generation/rollout.h"
#include "io/rollout_file.h"
#include "reward/reward.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"
#include "roles/wire.h"

namespace hone {

template <class A>
void fields(A& a, Rollout& r) {
  a(r.prompt, r.completion, r.logprobs, r.finish_reason, r.text, r.sample_index, r.routing);
}

template <class A>
void fields(A& a, RolloutRecord& r) {
  a(r.group, r.prompt_id, r.prompt, r.completion, r.answer, r.reward, r.correct, r.advantage, r.trained,
    r.prompt_tokens, r.completion_tokens, r.truncated, r.logprob_sum, r.scores);
}

template <class A>
void fields(A& a, PolicyLossMetrics& m) {
  a(m.loss, m.pg_loss, m.kl_loss, m.entropy_loss, m.valid_tokens, m.valid_seqs, m.clipped_tokens,
    m.dual_clipped_tokens, m.is_masked_tokens, m.is_masked_seqs, m.ratio_sum, m.ratio_min, m.ratio_max, m.kl_sum,
    m.is_weight_sum, m.mult_prob_error_sum, m.entropy_sum);
}

namespace reward {  // beside the types, where wire.h's calls find them

template <class A>
void fields(A& a, RewardScore& s) {
  a(s.name, s.value);
}

template <class A>
void fields(A& a, RewardResult& r) {
  a(r.reward, r.correct, r.formatted, r.extracted, r.scores);
}

}  // namespace reward

namespace rl {

// A scored sample as generation hands it to training: its place in the step, the rollout, the reward and its
// sub-scores. What the trainer computes afterwards (the prompt's index on the trainer's rank, the advantage, the
// old and reference logprobs) does not travel.
template <class A>
void fields(A& a, GrpoSample& s) {
  a(s.position, s.rollout, s.reward, s.correct, s.scores);
}

}  // namespace rl
}  // namespace hone
