// output.rollouts = "all": every rollout of the step, gathered in global order onto data-parallel rank 0 for the
// output (io/rollout_file.h). Collective over the data-parallel ranks.
#include <algorithm>

#include "comm/host_collectives.h"
#include "io/rollout_file.h"
#include "rl/grpo_trainer_state.h"
#include "roles/rollout_wire.h"
#include "runtime/error.h"

namespace hone::rl {


void GrpoTrainer::record_rollouts(const StepState& st, StepRow& row) {
  const int64_t G = s_.generations;
  WireWriter w;
  for (const GrpoSample& s : st.samples) {
    const data::Prompt& p = st.prompts[size_t(s.prompt_index)];
    RolloutRecord r;
    r.group = s.position / G;
    r.prompt_id = p.id;
    r.prompt = tok_->decode(s.rollout.prompt, false);
    r.completion = s.rollout.text;
    r.answer = p.answer;
    r.reward = s.reward;
    r.correct = s.correct;
    r.advantage = s.advantage;
    r.trained = s.trained;
    r.prompt_tokens = int64_t(s.rollout.prompt.size());
    r.completion_tokens = int64_t(s.rollout.completion.size());
    r.truncated = s.rollout.finish_reason == FinishReason::length;
    double sum = 0;
    for (float lp : s.rollout.logprobs) sum += lp;
    r.logprob_sum = sum;
    for (const reward::RewardScore& sc : s.scores) r.scores.emplace_back(sc.name, sc.value);
    w(s.position, r);
  }
  const std::vector<std::string> parts = gather_strings(ps_.dp(), w.bytes());
  if (ps_.dp_rank() != 0) return;
  std::vector<std::pair<int64_t, RolloutRecord>> all;
  for (const std::string& part : parts) {
    WireReader rd(part, "a rollout record message");
    while (!rd.done()) {
      const int64_t position = rd.read<int64_t>();
      all.emplace_back(position, rd.read<RolloutRecord>());
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto table = std::make_shared<RolloutTable>();
  table->step = st.step;
  table->rows.reserve(all.size());
  for (auto& [position, r] : all) table->rows.push_back(std::move(r));
  row.set_rollouts(std::move(table));
}

}  // namespace hone::rl
