// reward.library: the user's reward as a C ABI plug-in (include/hone/reward_plugin.h), loaded into hone and called
// once per batch. Loading checks the file, its symbols and its ABI version; each failure is a UserError naming
// reward.library and what is missing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "reward/batch_reward.h"

namespace hone::reward {

class PluginReward : public BatchReward {
 public:
  // dlopen(path), the ABI version, hone_reward_create(options, rank).
  PluginReward(const std::string& path, const std::string& options, int rank);
  ~PluginReward() override;  // hone_reward_destroy; the library stays loaded
  PluginReward(const PluginReward&) = delete;
  PluginReward& operator=(const PluginReward&) = delete;
  std::string name() const override { return "reward.library " + path_; }
  std::vector<RewardResult> score(const std::vector<RewardQuery>& batch) override;
  const std::vector<std::string>& score_names() const { return score_names_; }

 private:
  struct Api;
  void read_score_names();  // the plug-in's sub-score names, checked
  std::string path_;
  int rank_;
  std::unique_ptr<Api> api_;
  void* state_ = nullptr;
  std::vector<std::string> score_names_;
};

}  // namespace hone::reward
