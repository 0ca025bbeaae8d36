// Validation: accuracy on held-out problems every few steps, the curve a run is judged by (NeMo-RL's val_period,
// val_at_start, max_val_samples; verl's test_freq). The [validation] keys gathered into plain fields, and the
// metrics of one validation from its per-problem results. The run itself is GrpoTrainer::validate
// (rl/grpo_trainer_validation.cpp): the problems are generated on the generation engine between steps, sharded
// over the data-parallel ranks like a step's prompts, and scored by the training reward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "generation/sampler.h"

namespace hone {
class Config;
class StepRow;
}  // namespace hone

namespace hone::rl {

struct ValidationSettings {
  int64_t every = 0;       // validation.every (0: never)
  bool at_start = false;   // validation.at_start
  std::string path;        // validation.path (empty: data.task's synthetic problems)
  uint64_t seed = 1;       // validation.seed
  int64_t max_samples = 0; // validation.max_samples (0: the whole file)
  int64_t generations = 1; // validation.num_generations (k)
  SamplingParams sampling; // greedy when validation.temperature = 0

  bool enabled() const { return every > 0 || at_start; }
  // Whether a validation follows step `step` (1-based).
  bool due(int64_t step) const { return every > 0 && step % every == 0; }
  // The key of validation's random numbers: never the training stream's, even with validation.seed = run.seed.
  uint64_t stream_key() const;
};

// Reads [validation]. UserError naming the key: a JSONL data.task without validation.path while validation is on,
// validation.max_samples = 0 for synthetic problems (an endless stream), a validation.path that is no file.
ValidationSettings read_validation_settings(const Config& c);

// One problem's k samples, scored.
struct ValidationProblem {
  int64_t correct = 0;  // samples with a correct answer
  int64_t samples = 0;  // k
  double reward = 0;    // summed over the samples
  int64_t tokens = 0, max_tokens = 0, truncated = 0;
};

// This rank's sums; reduced over the data-parallel ranks before set_metrics.
struct ValidationTotals {
  enum { kProblems, kSamples, kCorrect, kSolved, kReward, kTokens, kTruncated, kTooLong, kN };
  double sum[kN] = {};
  double max_tokens = 0;
  double seconds = 0;  // the slowest rank's after the reduction

  void add(const ValidationProblem& p);
  // /validation metrics of io/output_metrics.h (validation_metric_catalog) into row.
  void set_metrics(StepRow& row) const;
};

// The stdout line of one validation, from its row.
std::string format_validation_line(const StepRow& row, int64_t k);

}  // namespace hone::rl
