// The step's metrics: local sums reduced over the data-parallel ranks into one StepRow (doc/output.md lists them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <string>

#include "comm/host_collectives.h"
#include "runtime/error.h"
#include "io/output_metrics.h"
#include "roles/rollout_wire.h"
#include "rl/grpo_trainer_state.h"
#include "rl/moe_metrics.h"

namespace hone::rl {

namespace {

const double kInf = std::numeric_limits<double>::infinity();

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Indices of the sums over ranks.
enum SumIndex {
  kCount, kReward, kReward2, kCorrect, kAdv, kGen, kTrunc, kPromptTok, kGenAll, kLogprobTok, kTrainTok,
  kPacked, kSlots, kTooLong, kGroups, kZeroVar, kLoss, kPg, kKl, kValid, kClipped, kRatio, kKlSum, kIsW, kMpe,
  kEntropy, kNSum
};

// The step's sums and extremes: this rank's, until reduce_over_ranks.
struct StepTotals {
  double sum[kNSum] = {};
  double mn[3] = {kInf, kInf, kInf};        // reward, advantage, ratio
  double mx[4] = {-kInf, -kInf, -kInf, 0};  // reward, advantage, ratio, generated tokens of one sample
};

void add_samples(StepTotals& t, const std::vector<GrpoSample>& samples) {
  double* sum = t.sum;
  for (const auto& s : samples) {
    sum[kCount] += 1;
    sum[kReward] += s.reward;
    sum[kReward2] += s.reward * s.reward;
    sum[kCorrect] += s.correct ? 1 : 0;
    sum[kAdv] += s.advantage;
    sum[kGen] += double(s.rollout.completion.size());
    sum[kTrunc] += s.rollout.finish_reason == FinishReason::length ? 1 : 0;
    t.mn[0] = std::min(t.mn[0], s.reward), t.mx[0] = std::max(t.mx[0], s.reward);
    t.mn[1] = std::min(t.mn[1], double(s.advantage)), t.mx[1] = std::max(t.mx[1], double(s.advantage));
    t.mx[3] = std::max(t.mx[3], double(s.rollout.completion.size()));
  }
}

void add_loss(StepTotals& t, const PolicyLossMetrics& L, double entropy_sum) {
  double* sum = t.sum;
  sum[kLoss] = L.loss, sum[kPg] = L.pg_loss, sum[kKl] = L.kl_loss;
  sum[kValid] = double(L.valid_tokens), sum[kClipped] = double(L.clipped_tokens);
  sum[kRatio] = L.ratio_sum, sum[kKlSum] = L.kl_sum, sum[kIsW] = L.is_weight_sum, sum[kMpe] = L.mult_prob_error_sum;
  sum[kEntropy] = entropy_sum;
  t.mn[2] = L.valid_tokens > 0 ? L.ratio_min : kInf;
  t.mx[2] = L.valid_tokens > 0 ? L.ratio_max : -kInf;
}

void reduce_over_ranks(StepTotals& t, Comm& dp) {
  dp.all_reduce_sum(t.sum, kNSum);
  dp.all_reduce_min(t.mn, 3);
  dp.all_reduce_max(t.mx, 4);
}

void set_sample_metrics(StepRow& row, const StepTotals& t) {
  const double* sum = t.sum;
  const double n = sum[kCount];
  if (n > 0) {
    const double mean = sum[kReward] / n;
    row.set("reward/mean", mean);
    row.set("reward/std", std::sqrt(std::max(0.0, sum[kReward2] / n - mean * mean)));
    row.set("reward/min", t.mn[0]);
    row.set("reward/max", t.mx[0]);
    row.set("accuracy", sum[kCorrect] / n);
    row.set("advantages/mean", sum[kAdv] / n);
    row.set("advantages/min", t.mn[1]);
    row.set("advantages/max", t.mx[1]);
    row.set("generated_tokens/mean", sum[kGen] / n);
    row.set("generated_tokens/max", t.mx[3]);
    row.set("truncation_rate", sum[kTrunc] / n);
  }
  row.set("samples", n);
}

// Per optimizer step (loss, gradient norm, learning rate) and per valid token (entropy, clipping, ratios).
void set_loss_metrics(StepRow& row, const StepTotals& t, int64_t optimizer_steps, int64_t skipped_updates,
                      double grad_norm_sum, double lr, bool with_kl) {
  const double* sum = t.sum;
  if (optimizer_steps > 0) {
    row.set("loss", sum[kLoss] / double(optimizer_steps));
    row.set("pg_loss", sum[kPg] / double(optimizer_steps));
    if (with_kl) {
      row.set("kl_loss", sum[kKl] / double(optimizer_steps));
      row.set("kl", sum[kKlSum] / std::max(1.0, sum[kValid]));
    }
    // Over the applied updates; NaN when every update of the step was skipped (its norm was not finite).
    const int64_t applied = optimizer_steps - skipped_updates;
    row.set("grad_norm", applied > 0 ? grad_norm_sum / double(applied) : std::nan(""));
    row.set("lr", lr);
  }
  if (sum[kValid] > 0) {
    row.set("entropy", sum[kEntropy] / sum[kValid]);
    row.set("clip_fraction", sum[kClipped] / sum[kValid]);
    row.set("ratio/min", t.mn[2]);
    row.set("ratio/mean", sum[kRatio] / sum[kValid]);
    row.set("ratio/max", t.mx[2]);
    row.set("token_mult_prob_error", sum[kMpe] / sum[kValid]);
    row.set("is_weight/mean", sum[kIsW] / sum[kValid]);
  }
}

// Times and rates. tokens_per_s: generation counts generated tokens, reward scored completion tokens, logprob and
// training the packed tokens they ran, refit the parameters copied, total every prompt and generated token.
void set_phase_metrics(StepRow& row, const StepTotals& t, const std::vector<std::string>& phases,
                       const std::vector<double>& times) {
  const double* sum = t.sum;
  for (size_t i = 0; i < phases.size(); ++i) row.set("time/" + phases[i], times[i]);
  auto rate = [&](const char* phase, double tokens, double seconds) {
    if (seconds > 0 && tokens > 0) row.set(std::string("tokens_per_s/") + phase, tokens / seconds);
  };
  rate("generation", sum[kGenAll], times[0]);
  rate("reward", sum[kGen], times[1]);
  rate("logprob", sum[kLogprobTok], times[2]);
  rate("training", sum[kTrainTok], times[3]);
  rate("total", sum[kPromptTok] + sum[kGenAll], times[5]);
}

// Memory (the largest rank's): what the engine held at the peak of each phase: every parameter copy, gradients
// and optimizer state, plus the KV cache for generation and the activation arenas for logprob and training; on
// the GPU also the driver's count of device memory in use (workspaces and the CUDA context included).
void set_memory_metrics(StepRow& row, const EngineMemory& em, Comm& world) {
  double mem[7] = {em.generation, em.idle, em.logprob, em.training, em.refit, 0, em.device};
  mem[5] = std::max({mem[0], mem[2], mem[3], mem[4]});
  world.all_reduce_max(mem, 7);
  row.set("memory/peak_generation", mem[0]);
  row.set("memory/peak_reward", mem[1]);
  row.set("memory/peak_logprob", mem[2]);
  row.set("memory/peak_training", mem[3]);
  row.set("memory/peak_refit", mem[4]);
  row.set("memory/peak_total", mem[5]);
  if (mem[6] > 0) row.set("memory/device_peak", mem[6]);
}

// The reward's sub-scores: scores/<name>, the mean over the step's rollouts that have it. The names are whatever the
// reward gave on any rank, so each rank sends its (name, sum, count) list to rank 0.
void set_score_metrics(StepRow& row, const std::vector<GrpoSample>& samples, Comm& dp) {
  std::map<std::string, std::pair<double, double>> mine;
  for (const GrpoSample& s : samples)
    for (const reward::RewardScore& sc : s.scores) {
      auto& [sum, count] = mine[sc.name];
      sum += sc.value;
      count += 1;
    }
  using Sums = std::vector<std::pair<std::string, std::pair<double, double>>>;  // name, (sum, count)
  const std::string bytes = wire_encode(Sums(mine.begin(), mine.end()));
  std::map<std::string, std::pair<double, double>> all;
  for (const std::string& part : gather_strings(dp, bytes))
    for (const auto& [name, sc] : wire_decode<Sums>(part, "a sub-score message")) {
      all[name].first += sc.first;
      all[name].second += sc.second;
    }
  for (const auto& [name, sc] : all) row.set("scores/" + name, sc.first / sc.second);
}

}  // namespace

// Collective over the data-parallel ranks: the reductions run in the same order on every rank.
void GrpoTrainer::record(StepState& st, StepRow& row, int64_t num_samples) {
  StepTotals t;
  add_samples(t, st.samples);
  t.sum[kPromptTok] = double(st.prompt_tokens);
  t.sum[kGenAll] = double(st.generated_tokens_all);
  t.sum[kLogprobTok] = double(st.logprob_tokens);
  t.sum[kTrainTok] = double(st.training_tokens);
  t.sum[kPacked] = double(st.packed_tokens);
  t.sum[kSlots] = double(st.packed_slots);
  t.sum[kTooLong] = double(st.prompts_too_long);
  t.sum[kGroups] = double(st.groups_generated);
  t.sum[kZeroVar] = double(st.groups_zero_variance);
  add_loss(t, st.loss, st.entropy_sum);
  reduce_over_ranks(t, ps_.dp());

  // Phase times: the slowest rank's (of any stage and shard).
  std::vector<double> times;
  for (const auto& p : step_phases()) times.push_back(timer_.seconds(p));
  ps_.world().all_reduce_max(times.data(), int64_t(times.size()));

  set_sample_metrics(row, t);
  set_loss_metrics(row, t, st.optimizer_steps, st.skipped_updates, st.grad_norm_sum, st.lr, s_.loss.kl_coef > 0);
  const double* sum = t.sum;
  row.set("optimizer_steps", double(st.optimizer_steps));
  row.set("skipped_updates", double(st.skipped_updates));
  row.set("prompt_tokens", sum[kPromptTok]);
  if (sum[kSlots] > 0) row.set("packing_efficiency", sum[kPacked] / sum[kSlots]);
  row.set("zero_variance_fraction", sum[kGroups] > 0 ? sum[kZeroVar] / sum[kGroups] : 0.0);
  row.set("dynamic_sampling/batches", double(st.batches));
  row.set("dynamic_sampling/groups", double(st.groups_kept_global));
  row.set("prompts_too_long", sum[kTooLong]);
  row.set("microbatches", double(st.microbatches));
  set_score_metrics(row, st.samples, ps_.dp());
  set_phase_metrics(row, t, step_phases(), times);
  set_memory_metrics(row, roles_.engine->memory(), ps_.world());
  set_layout_metrics(row);
  set_moe_metrics(row, roles_.learner->take_moe_stats(), mc_, ps_.dp());
  set_generation_metrics(row);

  if (num_samples > 0) record_samples(st, row, num_samples);
  if (s_.all_rollouts) record_rollouts(st, row);
}

// The pipeline's bubble and exchanges, the resharding refit's bytes, the offload's time, the decode graphs'
// captures and replays. Collective over the world.
void GrpoTrainer::set_layout_metrics(StepRow& row) {
  const EngineStepStats e = roles_.engine->stats();
  const double passes = e.pipeline_compute_s + e.pipeline_exchange_s;
  const double bubble = e.pipeline_makespan > 0 ? 1.0 - e.pipeline_busy / e.pipeline_makespan : 0.0;
  double mx[5] = {bubble, passes > 0 ? e.pipeline_exchange_s / passes : 0.0, e.offload_s, double(e.graph_captures),
                  double(e.graph_replays)};
  ps_.world().all_reduce_max(mx, 5);
  const double bytes = all_reduce_sum_value(ps_.world(), e.refit_bytes);
  step_note_.clear();
  if (ps_.pp_size() > 1) {
    row.set("pipeline/bubble", mx[0]);
    row.set("pipeline/exchange_fraction", mx[1]);
    step_note_ = cat("pipeline: ", e.schedule, " over ", ps_.pp_size(), " stages, ", e.pipeline_microbatches,
                     " micro-batches in ", e.pipeline_passes, e.pipeline_passes == 1 ? " pass" : " passes",
                     " (rank 0): bubble ", fixed(mx[0], 3), " by the schedule, ", fixed(100 * mx[1], 1),
                     "% of training in exchanges");
  }
  if (!gen_.same_as_training) {
    row.set("refit/bytes", bytes);
    step_note_ += cat(step_note_.empty() ? "" : "; ", "refit resharded ", fixed(bytes / 1e6, 3), " MB");
  }
  if (s_.offload_during_generation) row.set("time/offload", mx[2]);
  if (s_.cuda) {
    row.set("generation/cuda_graph_captures", mx[3]);
    row.set("generation/cuda_graph_replays", mx[4]);
  }
}

// The tail of the step's generation calls (generation/generation_tail.h). Every rank of a replica ran the same calls:
// its leader counts them. Collective over the world.
void GrpoTrainer::set_generation_metrics(StepRow& row) {
  const GenerationTail g = roles_.engine->stats().generation;
  const bool leader = gen_.rank_in_replica(ps_.world_rank()) == 0;
  double sum[6] = {double(g.generated_tokens), double(g.tail_tokens), double(g.decode_rows), double(g.decode_steps),
                   double(g.batch_slots), double(std::max<int64_t>(g.idle_passes, 0))};
  if (!leader) std::fill(std::begin(sum), std::end(sum), 0.0);
  double mx[3] = {g.seconds, g.tail_seconds, g.idle_passes >= 0 ? 1.0 : 0.0};
  ps_.world().all_reduce_sum(sum, 6);
  ps_.world().all_reduce_max(mx, 3);
  if (mx[2] > 0) row.set("generation/expert_idle_passes", sum[5]);
  if (sum[0] <= 0 || mx[0] <= 0) return;
  const double tokens_per_s = sum[0] / mx[0];
  row.set("generation/tokens_per_s", tokens_per_s);
  row.set("generation/tail_s", mx[1]);
  row.set("generation/tail_tokens", sum[1]);
  if (sum[3] > 0) {
    row.set("generation/mean_running_seqs", sum[2] / sum[3]);
    row.set("generation/batch_occupancy", sum[2] / sum[4]);
  }
  if (!lengths_.on()) return;
  step_note_ += cat(step_note_.empty() ? "" : "; ", "generation ", fixed(tokens_per_s, 0), " tokens/s; last 10% of ",
                    "sequences ", fixed(mx[1], 3), " s (", fixed(sum[1], 0), " tokens)");
  if (sum[3] > 0)
    step_note_ += cat("; batch occupancy ", fixed(sum[2] / sum[4], 3), " (", fixed(sum[2] / sum[3], 1), " of ",
                      fixed(sum[4] / sum[3], 0), " running per decode step)");
}

namespace {

// A sample of /samples as it travels to the output's rank.
struct SampleText {
  int64_t position = 0;
  double reward = 0;
  std::string prompt, completion;
};
template <class A>
void fields(A& a, SampleText& x) {
  a(x.position, x.reward, x.prompt, x.completion);
}

}  // namespace

// The step's first num_samples rollouts in global order: each rank sends those it generated, rank 0 sorts them.
void GrpoTrainer::record_samples(const StepState& st, StepRow& row, int64_t num_samples) {
  std::vector<SampleText> mine;
  for (const GrpoSample& s : st.samples)
    if (s.position < num_samples)
      mine.push_back({s.position, s.reward, tok_->decode(s.rollout.prompt, false), s.rollout.text});
  std::vector<SampleText> all;
  for (const std::string& part : gather_strings(ps_.dp(), wire_encode(mine)))
    for (SampleText& x : wire_decode<std::vector<SampleText>>(part, "a sample message")) all.push_back(std::move(x));
  std::sort(all.begin(), all.end(),
            [](const SampleText& a, const SampleText& b) { return a.position < b.position; });
  for (SampleText& x : all) row.add_sample(std::move(x.prompt), std::move(x.completion), x.reward);
}

}  // namespace hone::rl
