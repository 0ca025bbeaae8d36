// The reward as the GRPO step calls it: a batch of rollouts in, one result per rollout out. The built-in rewards
// (the math checker, the synthetic tasks' checkers) score one completion at a time and never fail; the user's own
// rewards (an external process, reward/process_reward.h; a C plug-in, reward/plugin_reward.h) score whole batches
// and throw UserError, naming themselves and what went wrong, when they fail.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reward/reward.h"

namespace hone::reward {

// What a reward is given for one rollout.
struct RewardQuery {
  const data::Prompt* prompt = nullptr;   // the prompt as the dataset gave it (text, messages, answer, extra fields)
  std::string_view completion;      // the decoded completion (cut before a stop string)
  int64_t completion_tokens = 0;    // generated tokens
  bool truncated = false;           // stopped by generation.max_new_tokens, not by a stop token or string
  int64_t step = 0;                 // the GRPO step
};

class BatchReward {
 public:
  virtual ~BatchReward() = default;
  // For logs and messages: "reverse", "math", "reward.command `python3 r.py`", "reward.library x.so".
  virtual std::string name() const = 0;
  // One result per query, in order. UserError when a user reward fails (never for the built-in ones).
  virtual std::vector<RewardResult> score(const std::vector<RewardQuery>& batch) = 0;
};

// A built-in reward (RewardFunction) scoring one completion at a time.
class BuiltinReward : public BatchReward {
 public:
  explicit BuiltinReward(std::shared_ptr<const RewardFunction> f) : f_(std::move(f)) {}
  std::string name() const override { return f_->name(); }
  std::vector<RewardResult> score(const std::vector<RewardQuery>& batch) override;

 private:
  std::shared_ptr<const RewardFunction> f_;
};

// Scores `queries` in batches of at most batch_size (0: all at once), results in order.
std::vector<RewardResult> score_in_batches(BatchReward& reward, const std::vector<RewardQuery>& queries,
                                           int64_t batch_size);

// Whether a sub-score name can be a metric name segment: 1 to 64 of letters, digits, '_', '.', '-', not "." or "..".
bool valid_score_name(std::string_view name);

// The distinct sub-score names one reward may give over a run (a plug-in declares them, a process's replies
// introduce them): each is a dataset of the output file and a column of every step.
inline constexpr size_t kMaxScoreNames = 1024;

}  // namespace hone::reward
