// Scoring a step's rollouts (doc/data-and-rewards.md). They are scored on the generation replica that made them
// (parallel/generation_layout.h: a training tensor-parallel group, or a replica of generation.tp ranks of its own)
// before they move to the ranks that train on them. The ranks of one replica hold the same rollouts; only its
// first rank runs the reward (one reward process per distinct set of rollouts), and the others take its results, so the ranks agree on the rewards even when the reward is not deterministic (a judge
// model, a sandbox timing out). A reward that fails on any rank ends every rank with its message.
#include "comm/host_collectives.h"
#include "rl/grpo_trainer_state.h"
#include "roles/rollout_wire.h"
#include "runtime/agree.h"
#include "runtime/error.h"

namespace hone::rl {


Comm* GrpoTrainer::scoring_group() const {
  if (gen_.tg == 1) return nullptr;
  return gen_.same_as_training ? &ps_.tp() : &gen_group_->host();
}

std::vector<reward::RewardResult> GrpoTrainer::score_queries(const std::vector<reward::RewardQuery>& queries) {
  std::vector<reward::RewardResult> results;
  agreed([&] {
    if (reward_) results = score_in_batches(*reward_, queries, reward_batch_size_);
  });
  if (Comm* group = scoring_group()) {
    const std::string bytes = broadcast_string(*group, group->rank() == 0 ? wire_encode(results) : std::string());
    if (group->rank() != 0) results = wire_decode<std::vector<reward::RewardResult>>(bytes, "a reward broadcast");
  }
  HONE_CHECK(results.size() == queries.size(), results.size(), " rewards for ", queries.size(), " rollouts");
  return results;
}

void GrpoTrainer::score_samples(StepState& st, size_t begin) {
  std::vector<reward::RewardQuery> queries;
  for (size_t i = begin; i < st.samples.size(); ++i) {
    const GrpoSample& s = st.samples[i];
    reward::RewardQuery q;
    q.prompt = &st.prompts[size_t(s.prompt_index)];
    q.completion = s.rollout.text;
    q.completion_tokens = int64_t(s.rollout.completion.size());
    q.truncated = s.rollout.finish_reason == FinishReason::length;
    q.step = st.step;
    queries.push_back(q);
  }
  std::vector<reward::RewardResult> results = score_queries(queries);
  for (size_t i = 0; i < results.size(); ++i) {
    GrpoSample& s = st.samples[begin + i];
    s.reward = results[i].reward;
    s.correct = results[i].correct;
    s.scores = std::move(results[i].scores);
  }
}

}  // namespace hone::rl
