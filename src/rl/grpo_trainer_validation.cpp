// Validation between steps (rl/validation.h): the held-out problems, read once at construction, generated on the
// generation engine with the current weights and scored by the training reward.
//
// What keeps it apart from training: the problems come from their own source (validation.path, or the synthetic
// task under validation.seed's stream), never the training data's cursor; the completions are sampled with the
// validation stream's key (Philox is stateless: no generator state of training moves); and the engine's generation
// memory is freed again afterwards, as at the end of a step's generation phase. A run with validation therefore
// trains exactly as one without (tests/unit/test_validation.cpp).
#include <algorithm>

#include "comm/host_collectives.h"
#include "config/config.h"
#include "data/dataset_jsonl.h"
#include "rl/grpo_trainer.h"
#include "rl/host_memory_plan.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/progress.h"
#include "runtime/timer.h"

namespace hone::rl {

void GrpoTrainer::build_validation(const Config& c, HostMemoryPlan& plan) {
  val_ = read_validation_settings(c);
  if (!val_.enabled()) return;
  task::TaskOptions o = task_options(c);
  if (!val_.path.empty()) {
    o.synthetic.task.clear();
    o.dataset.path = val_.path;
    o.dataset.prompt_key = c.get_string("data.prompt_key");
    o.dataset.answer_key = c.get_string("data.answer_key");
    o.dataset.skip_bad_lines = c.get_bool("data.skip_bad_lines");
    o.dataset.shuffle = false;  // the first max_samples problems of the file, the same at every validation
  } else {
    o.synthetic.seed = val_.stream_key();
  }
  task::Task v;
  try {
    v = task::make_task(o, [this](const data::Prompt& p) { return int64_t(encode_prompt(p).size()); });
  } catch (const UserError& e) {
    throw UserError(cat(val_.path.empty() ? "validation problems" : cat("validation.path = \"", val_.path, "\""), ": ",
                        e.what()));
  }
  const int64_t available = v.prompts->epoch_size();
  const int64_t n = val_.max_samples > 0 ? std::min(val_.max_samples, available) : available;
  // Before the problems are drawn (a synthetic task makes validation.max_samples of them here).
  set_host_validation(plan, n, val_.generations, gen_.replicas());
  check_host_memory(plan);
  val_prompts_ = v.prompts->next_batch(n);
  log_debug("validation: ", n, " problems of ", v.prompts->describe());
}

StepRow GrpoTrainer::validate(int64_t step) {
  StepRow row(step);
  roles_.engine->synchronize();
  const Timer timer;
  const int64_t N = int64_t(val_prompts_.size()), k = val_.generations;
  // Sharded over the generation replicas (the data-parallel ranks when generation runs on the training layout).
  const data::ShardRange shard = data::shard_range(N, gen_.replica(ps_.world_rank()), gen_.replicas());
  ValidationTotals totals;

  std::vector<GenerationRequest> requests;
  std::vector<int64_t> problem_of;  // per kept problem: its index in val_prompts_
  for (int64_t i = shard.begin; i < shard.end; ++i) {
    std::vector<int32_t> ids = encode_prompt(val_prompts_[size_t(i)]);
    if (ids.empty() || int64_t(ids.size()) + s_.max_new_tokens > s_.max_total_sequence_length) {
      totals.sum[ValidationTotals::kTooLong] += 1;
      continue;
    }
    for (int64_t g = 0; g < k; ++g) requests.push_back({ids, i * k + g});
    problem_of.push_back(i);
  }
  const DecodeFunction decode = [this](const std::vector<int32_t>& ids) { return tok_->decode(ids, true); };
  if (progress_)
    progress_->begin(cat("validation at step ", step, gen_.replicas() > 1 ? " on rank 0" : ""), "sequences");
  std::vector<Rollout> rollouts;
  if (!requests.empty())
    rollouts = roles_.generator->generate(requests, val_.sampling, stop_, val_.stream_key(), 0,
                                 int(s_.max_total_sequence_length), decode);
  roles_.generator->end_generation();
  if (progress_) progress_->end();

  // Scored by the step's reward (a user's program or plug-in too), as the training rollouts are.
  std::vector<reward::RewardQuery> queries;
  for (size_t p = 0; p < problem_of.size(); ++p)
    for (int64_t g = 0; g < k; ++g) {
      const Rollout& r = rollouts[p * size_t(k) + size_t(g)];
      reward::RewardQuery q;
      q.prompt = &val_prompts_[size_t(problem_of[p])];
      q.completion = r.text;
      q.completion_tokens = int64_t(r.completion.size());
      q.truncated = r.finish_reason == FinishReason::length;
      q.step = step;
      queries.push_back(q);
    }
  const std::vector<reward::RewardResult> scores = score_queries(queries);
  for (size_t p = 0; p < problem_of.size(); ++p) {
    ValidationProblem vp;
    for (int64_t g = 0; g < k; ++g) {
      const Rollout& r = rollouts[p * size_t(k) + size_t(g)];
      const reward::RewardResult& score = scores[p * size_t(k) + size_t(g)];
      ++vp.samples;
      vp.correct += score.correct ? 1 : 0;
      vp.reward += score.reward;
      vp.tokens += int64_t(r.completion.size());
      vp.max_tokens = std::max(vp.max_tokens, int64_t(r.completion.size()));
      vp.truncated += r.finish_reason == FinishReason::length ? 1 : 0;
    }
    totals.add(vp);
  }
  roles_.engine->synchronize();
  totals.seconds = timer.seconds();
  // The same reductions in the same order on every rank; a replica's problems are counted once, by its first rank.
  if (gen_.rank_in_replica(ps_.world_rank()) != 0)
    for (double& v : totals.sum) v = 0;
  ps_.world().all_reduce_sum(totals.sum, ValidationTotals::kN);
  double maxes[2] = {totals.max_tokens, totals.seconds};
  ps_.world().all_reduce_max(maxes, 2);
  totals.max_tokens = maxes[0];
  totals.seconds = maxes[1];
  totals.set_metrics(row);
  return row;
}

}  // namespace hone::rl
