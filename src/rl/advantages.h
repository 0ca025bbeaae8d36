// Group-relative advantages of GRPO: the G completions of one prompt form a group (contiguous in the rewards
// array), and each completion's advantage is its reward against the group's baseline.
//
//   baseline_i = mean of the group                     (grpo.use_leave_one_out_baseline = false)
//              = mean of the other G - 1 rewards       (grpo.use_leave_one_out_baseline = true, RLOO)
//   A_i = r_i - baseline_i,  divided by (std + 1e-6) when grpo.normalize_rewards = true,
//   std = the unbiased (Bessel, n - 1) standard deviation of the whole group (as torch.std in verl's GRPO).
// A group whose rewards are all equal (no learning signal), and any group of one (G = 1), gets advantage 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace hone {

struct AdvantageOptions {
  bool normalize_rewards = true;        // grpo.normalize_rewards
  bool leave_one_out_baseline = false;  // grpo.use_leave_one_out_baseline
  double std_eps = 1e-6;
};

struct GroupRewardStats {
  double mean = 0;
  double std = 0;  // unbiased; 0 for a group of one
  double min = 0;
  double max = 0;
  bool zero_variance = true;  // every reward equal (always true for a group of one)
};

// Statistics of each group; rewards.size() must be a multiple of group_size.
std::vector<GroupRewardStats> group_reward_stats(std::span<const float> rewards, int64_t group_size);

// One advantage per reward.
std::vector<float> compute_advantages(std::span<const float> rewards, int64_t group_size,
                                      const AdvantageOptions& options);

// Dynamic sampling: indices of the groups whose rewards are all equal (these carry no gradient signal) ...
std::vector<int64_t> zero_variance_groups(std::span<const float> rewards, int64_t group_size);
// ... and of the groups that do carry signal, in ascending order.
std::vector<int64_t> groups_with_signal(std::span<const float> rewards, int64_t group_size);

}  // namespace hone
