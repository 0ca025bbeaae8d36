// Group-relative advantages (formulas in advantages.h). Sums are in double.
#include "rl/advantages.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace hone {

namespace {

void check_groups(std::span<const float> rewards, int64_t group_size) {
  HONE_CHECK(group_size >= 1, "group size must be >= 1, got ", group_size);
  HONE_CHECK(rewards.size() % static_cast<size_t>(group_size) == 0, rewards.size(),
             " rewards do not split into groups of ", group_size);
  for (size_t i = 0; i < rewards.size(); ++i) HONE_CHECK(std::isfinite(rewards[i]), "reward ", i, " is ", rewards[i]);
}

}  // namespace

std::vector<GroupRewardStats> group_reward_stats(std::span<const float> rewards, int64_t group_size) {
  check_groups(rewards, group_size);
  const size_t g = static_cast<size_t>(group_size);
  std::vector<GroupRewardStats> stats(rewards.size() / g);
  for (size_t k = 0; k < stats.size(); ++k) {
    const std::span<const float> r = rewards.subspan(k * g, g);
    GroupRewardStats& s = stats[k];
    double sum = 0;
    s.min = s.max = r[0];
    for (float x : r) {
      sum += x;
      s.min = std::min(s.min, static_cast<double>(x));
      s.max = std::max(s.max, static_cast<double>(x));
    }
    s.mean = sum / static_cast<double>(g);
    s.zero_variance = s.min == s.max;
    if (g > 1 && !s.zero_variance) {
      double ss = 0;
      for (float x : r) ss += (x - s.mean) * (x - s.mean);
      s.std = std::sqrt(ss / static_cast<double>(g - 1));
    }
  }
  return stats;
}

std::vector<float> compute_advantages(std::span<const float> rewards, int64_t group_size,
                                      const AdvantageOptions& options) {
  HONE_CHECK(options.std_eps >= 0, "std_eps must be >= 0");
  const std::vector<GroupRewardStats> stats = group_reward_stats(rewards, group_size);
  const size_t g = static_cast<size_t>(group_size);
  std::vector<float> adv(rewards.size(), 0.0f);
  for (size_t k = 0; k < stats.size(); ++k) {
    const GroupRewardStats& s = stats[k];
    if (s.zero_variance) continue;  // includes G = 1
    const double sum = s.mean * static_cast<double>(g);
    for (size_t j = 0; j < g; ++j) {
      const double r = rewards[k * g + j];
      const double baseline = options.leave_one_out_baseline ? (sum - r) / static_cast<double>(g - 1) : s.mean;
      double a = r - baseline;
      if (options.normalize_rewards) a /= s.std + options.std_eps;
      adv[k * g + j] = static_cast<float>(a);
    }
  }
  return adv;
}

std::vector<int64_t> zero_variance_groups(std::span<const float> rewards, int64_t group_size) {
  const std::vector<GroupRewardStats> stats = group_reward_stats(rewards, group_size);
  std::vector<int64_t> out;
  for (size_t k = 0; k < stats.size(); ++k)
    if (stats[k].zero_variance) out.push_back(static_cast<int64_t>(k));
  return out;
}

std::vector<int64_t> groups_with_signal(std::span<const float> rewards, int64_t group_size) {
  const std::vector<GroupRewardStats> stats = group_reward_stats(rewards, group_size);
  std::vector<int64_t> out;
  for (size_t k = 0; k < stats.size(); ++k)
    if (!stats[k].zero_variance) out.push_back(static_cast<int64_t>(k));
  return out;
}

}  // namespace hone
