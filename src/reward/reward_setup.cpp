// Choosing the step's reward (see reward_setup.h).
#include "reward/reward_setup.h"

#include "config/config.h"
#include "reward/plugin_reward.h"
#include "reward/process_reward.h"
#include "runtime/error.h"

namespace hone::reward {

RewardOptions RewardOptions::from_config(const Config& c) {
  RewardOptions o;
  o.command = c.get_string("reward.command");
  o.library = c.get_string("reward.library");
  o.library_options = c.get_string("reward.library_options");
  o.timeout_s = c.get_float("reward.timeout_s");
  o.batch_size = c.get_int("reward.batch_size");
  return o;
}

MathRewardOptions math_reward_options(const Config& c) {
  MathRewardOptions m;
  m.format = parse_answer_format(c.get_string("reward.format"));
  m.format_reward = c.get_float("reward.format_reward");
  m.check.fallback_last_number = c.get_bool("reward.fallback_last_number");
  m.check.relative_tolerance = c.get_float("reward.relative_tolerance");
  return m;
}

std::unique_ptr<BatchReward> make_reward(const RewardOptions& o, std::shared_ptr<const RewardFunction> builtin,
                                         int rank) {
  HONE_USER_CHECK(o.command.empty() || o.library.empty(),
                  "reward.command and reward.library are both set: choose a program or a plug-in");
  if (!o.command.empty()) return std::make_unique<ProcessReward>(o.command, o.timeout_s, rank);
  if (!o.library.empty()) return std::make_unique<PluginReward>(o.library, o.library_options, rank);
  HONE_CHECK(builtin, "no built-in reward");
  return std::make_unique<BuiltinReward>(std::move(builtin));
}

}  // namespace hone::reward
