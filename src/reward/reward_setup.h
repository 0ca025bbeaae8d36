// The [reward] section turned into the step's reward: the user's program (reward.command), the user's plug-in
// (reward.library), or else the data's built-in reward (the math checker of JSONL data, a synthetic task's own).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "reward/batch_reward.h"
#include "reward/math_answer.h"

namespace hone {
class Config;
}

namespace hone::reward {

// Deck keys in brackets.
struct RewardOptions {
  std::string command;          // [reward.command]
  std::string library;          // [reward.library]
  std::string library_options;  // [reward.library_options]
  double timeout_s = 600;       // [reward.timeout_s]
  int64_t batch_size = 0;       // [reward.batch_size] 0: all of a call's rollouts at once

  static RewardOptions from_config(const Config& c);
  bool own() const { return !command.empty() || !library.empty(); }
};

// The math checker's options: reward.format, reward.format_reward, reward.fallback_last_number,
// reward.relative_tolerance.
MathRewardOptions math_reward_options(const Config& c);

// Starts the program or loads the plug-in (UserError naming the key when that fails); otherwise wraps `builtin`.
// rank: the world rank (the program's HONE_RANK, the plug-in's create argument).
std::unique_ptr<BatchReward> make_reward(const RewardOptions& options, std::shared_ptr<const RewardFunction> builtin,
                                         int rank);

}  // namespace hone::reward
