// The [data] section turned into a prompt source and its reward: a JSONL dataset scored by the math answer checker,
// or a built-in synthetic task scored by its own checker.
#pragma once

#include <memory>

#include "data/dataset_jsonl.h"
#include "reward/math_answer.h"
#include "data/synthetic_task.h"

namespace hone::rl {

struct DataOptions {
  DatasetOptions dataset;       // used when synthetic.task is empty; dataset.path names the file
  SyntheticTaskOptions synthetic;  // synthetic.task non-empty: that task (data.path must then be empty)
  MathRewardOptions math;       // the reward of JSONL datasets
};

struct DataSetup {
  std::unique_ptr<PromptSource> source;
  std::shared_ptr<const RewardFunction> reward;
};

// UserError when neither or both of data.path and data.task are set, or when either is invalid.
DataSetup make_data(const DataOptions& options, TokenCounter count_tokens = nullptr);

}  // namespace hone::rl
