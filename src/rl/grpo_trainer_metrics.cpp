// The step's metrics: local sums reduced over the data-parallel ranks into one StepRow (doc/output.md lists them).
#include <algorithm>
#include <cmath>
#include <limits>

#include "io/output_metrics.h"
#include "rl/grpo_dp.h"
#include "rl/grpo_trainer_state.h"

namespace hone::rl {

void GrpoTrainer::record(StepState& st, StepRow& row, int64_t num_samples) {
  const double inf = std::numeric_limits<double>::infinity();
  // Sums over ranks.
  enum {
    kCount, kReward, kReward2, kCorrect, kAdv, kGen, kTrunc, kPromptTok, kGenAll, kLogprobTok, kTrainTok,
    kPacked, kSlots, kTooLong, kGroups, kZeroVar, kLoss, kPg, kKl, kValid, kClipped, kRatio, kKlSum, kIsW, kMpe,
    kEntropy, kNSum
  };
  double sum[kNSum] = {};
  double mn[3] = {inf, inf, inf};     // reward, advantage, ratio
  double mx[4] = {-inf, -inf, -inf, 0};  // reward, advantage, ratio, generated tokens of one sample
  for (const auto& s : st.samples) {
    sum[kCount] += 1;
    sum[kReward] += s.reward;
    sum[kReward2] += s.reward * s.reward;
    sum[kCorrect] += s.correct ? 1 : 0;
    sum[kAdv] += s.advantage;
    sum[kGen] += double(s.rollout.completion.size());
    sum[kTrunc] += s.rollout.finish_reason == FinishReason::length ? 1 : 0;
    mn[0] = std::min(mn[0], s.reward), mx[0] = std::max(mx[0], s.reward);
    mn[1] = std::min(mn[1], double(s.advantage)), mx[1] = std::max(mx[1], double(s.advantage));
    mx[3] = std::max(mx[3], double(s.rollout.completion.size()));
  }
  sum[kPromptTok] = double(st.prompt_tokens);
  sum[kGenAll] = double(st.generated_tokens_all);
  sum[kLogprobTok] = double(st.logprob_tokens);
  sum[kTrainTok] = double(st.training_tokens);
  sum[kPacked] = double(st.packed_tokens);
  sum[kSlots] = double(st.packed_slots);
  sum[kTooLong] = double(st.prompts_too_long);
  sum[kGroups] = double(st.groups_generated);
  sum[kZeroVar] = double(st.groups_zero_variance);
  const PolicyLossMetrics& L = st.loss;
  sum[kLoss] = L.loss, sum[kPg] = L.pg_loss, sum[kKl] = L.kl_loss;
  sum[kValid] = double(L.valid_tokens), sum[kClipped] = double(L.clipped_tokens);
  sum[kRatio] = L.ratio_sum, sum[kKlSum] = L.kl_sum, sum[kIsW] = L.is_weight_sum, sum[kMpe] = L.mult_prob_error_sum;
  sum[kEntropy] = st.entropy_sum;
  mn[2] = L.valid_tokens > 0 ? L.ratio_min : inf;
  mx[2] = L.valid_tokens > 0 ? L.ratio_max : -inf;
  dp::sum(sum, kNSum);
  dp::min(mn, 3);
  dp::max(mx, 4);

  // Phase times: the slowest rank's.
  std::vector<double> times;
  for (const auto& p : step_phases()) times.push_back(timer_.seconds(p));
  dp::max(times.data(), int64_t(times.size()));

  const double n = sum[kCount];
  if (n > 0) {
    const double mean = sum[kReward] / n;
    row.set("reward/mean", mean);
    row.set("reward/std", std::sqrt(std::max(0.0, sum[kReward2] / n - mean * mean)));
    row.set("reward/min", mn[0]);
    row.set("reward/max", mx[0]);
    row.set("accuracy", sum[kCorrect] / n);
    row.set("advantages/mean", sum[kAdv] / n);
    row.set("advantages/min", mn[1]);
    row.set("advantages/max", mx[1]);
    row.set("generated_tokens/mean", sum[kGen] / n);
    row.set("generated_tokens/max", mx[3]);
    row.set("truncation_rate", sum[kTrunc] / n);
  }
  row.set("samples", n);
  if (st.optimizer_steps > 0) {
    row.set("loss", sum[kLoss] / double(st.optimizer_steps));
    row.set("pg_loss", sum[kPg] / double(st.optimizer_steps));
    if (s_.loss.kl_coef > 0) {
      row.set("kl_loss", sum[kKl] / double(st.optimizer_steps));
      row.set("kl", sum[kKlSum] / std::max(1.0, sum[kValid]));
    }
    row.set("grad_norm", st.grad_norm_sum / double(st.optimizer_steps));
    row.set("lr", st.lr);
  }
  if (sum[kValid] > 0) {
    row.set("entropy", sum[kEntropy] / sum[kValid]);
    row.set("clip_fraction", sum[kClipped] / sum[kValid]);
    row.set("ratio/min", mn[2]);
    row.set("ratio/mean", sum[kRatio] / sum[kValid]);
    row.set("ratio/max", mx[2]);
    row.set("token_mult_prob_error", sum[kMpe] / sum[kValid]);
    row.set("is_weight/mean", sum[kIsW] / sum[kValid]);
  }
  row.set("optimizer_steps", double(st.optimizer_steps));
  row.set("prompt_tokens", sum[kPromptTok]);
  if (sum[kSlots] > 0) row.set("packing_efficiency", sum[kPacked] / sum[kSlots]);
  row.set("zero_variance_fraction", sum[kGroups] > 0 ? sum[kZeroVar] / sum[kGroups] : 0.0);
  row.set("dynamic_sampling/batches", double(st.batches));
  row.set("dynamic_sampling/groups", double(st.groups_kept_global));
  row.set("prompts_too_long", sum[kTooLong]);
  row.set("microbatches", double(st.microbatches));

  // Times and rates. tokens_per_s: generation counts generated tokens, reward scored completion tokens, logprob and
  // training the packed tokens they ran, refit the parameters copied, total every prompt and generated token.
  const auto& phases = step_phases();
  for (size_t i = 0; i < phases.size(); ++i) row.set("time/" + phases[i], times[i]);
  auto rate = [&](const char* phase, double tokens, double seconds) {
    if (seconds > 0 && tokens > 0) row.set(std::string("tokens_per_s/") + phase, tokens / seconds);
  };
  rate("generation", sum[kGenAll], times[0]);
  rate("reward", sum[kGen], times[1]);
  rate("logprob", sum[kLogprobTok], times[2]);
  rate("training", sum[kTrainTok], times[3]);
  rate("total", sum[kPromptTok] + sum[kGenAll], times[5]);

  // Memory (rank 0): what the engine held at the peak of each phase: every parameter copy, gradients and
  // optimizer state, plus the KV cache for generation and the activation arenas for logprob and training.
  const EngineMemory mem = engine_->memory();
  row.set("memory/peak_generation", mem.generation);
  row.set("memory/peak_reward", mem.idle);
  row.set("memory/peak_logprob", mem.logprob);
  row.set("memory/peak_training", mem.training);
  row.set("memory/peak_refit", mem.refit);
  row.set("memory/peak_total", std::max({mem.generation, mem.logprob, mem.training, mem.refit}));

  // Samples: rank 0's first rollouts.
  for (int64_t i = 0; i < num_samples && i < int64_t(st.samples.size()); ++i) {
    const GrpoSample& s = st.samples[size_t(i)];
    row.add_sample(tok_->decode(s.rollout.prompt, false), s.rollout.text, s.reward);
  }
}

}  // namespace hone::rl
