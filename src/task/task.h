// A task: what the policy is asked (a prompt source, data/) and how its answers are judged (a checker, reward/),
// made from the [data] section: a JSONL dataset judged by the math answer checker, or a built-in synthetic task that
// judges its own answers. The step takes its prompts from the task and scores rollouts with the task's checker,
// unless the user's reward (reward.command, reward.library: reward/reward_setup.h) replaces the checker.
// A multi-turn environment is the next kind of task: one whose checker also answers between the turns.
#pragma once

#include <memory>

#include "data/dataset_jsonl.h"
#include "data/synthetic_task.h"
#include "reward/math_answer.h"

namespace hone::task {

struct TaskOptions {
  data::DatasetOptions dataset;         // used when synthetic.task is empty; dataset.path names the file
  data::SyntheticTaskOptions synthetic;  // synthetic.task non-empty: that task (data.path must then be empty)
  reward::MathRewardOptions math;       // the checker of JSONL datasets
};

struct Task {
  std::unique_ptr<data::PromptSource> prompts;
  std::shared_ptr<const reward::RewardFunction> checker;
};

// UserError when neither or both of data.path and data.task are set, or when either is invalid.
Task make_task(const TaskOptions& options, data::TokenCounter count_tokens = nullptr);

}  // namespace hone::task
