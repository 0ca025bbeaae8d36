// Group-relative advantages: mean and leave-one-out baselines by hand, unbiased-std normalization, zero-variance
// groups, G = 1, and the dynamic-sampling helpers.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "rl/advantages.h"
#include "runtime/error.h"

namespace tt = boost::test_tools;

namespace {

hone::AdvantageOptions opts(bool normalize, bool loo) {
  hone::AdvantageOptions o;
  o.normalize_rewards = normalize;
  o.leave_one_out_baseline = loo;
  return o;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(advantages)

// Group {1, 0, 0, 1}: mean 0.5, unbiased std sqrt(1/3).
BOOST_AUTO_TEST_CASE(mean_baseline_by_hand) {
  const std::vector<float> r = {1, 0, 0, 1};
  const std::vector<float> a = hone::compute_advantages(r, 4, opts(false, false));
  const std::vector<float> expect = {0.5f, -0.5f, -0.5f, 0.5f};
  BOOST_TEST(a == expect, tt::per_element());
  const std::vector<float> n = hone::compute_advantages(r, 4, opts(true, false));
  const double s = std::sqrt(1.0 / 3.0) + 1e-6;
  BOOST_TEST(n[0] == 0.5 / s, tt::tolerance(1e-6));
  BOOST_TEST(n[1] == -0.5 / s, tt::tolerance(1e-6));
}

// Group {3, 1, 2}: leave-one-out baselines 1.5, 2.5, 2 give advantages 1.5, -1.5, 0; equivalently
// G/(G-1) times the mean-baseline advantages (1, -1, 0).
BOOST_AUTO_TEST_CASE(leave_one_out_baseline_by_hand) {
  const std::vector<float> r = {3, 1, 2};
  const std::vector<float> a = hone::compute_advantages(r, 3, opts(false, true));
  BOOST_TEST(a[0] == 1.5f);
  BOOST_TEST(a[1] == -1.5f);
  BOOST_TEST(a[2] == 0.0f);
  // Normalized by the unbiased std of the whole group: sqrt(((1 + 1 + 0) / 2)) = 1.
  const std::vector<float> n = hone::compute_advantages(r, 3, opts(true, true));
  BOOST_TEST(n[0] == 1.5 / (1.0 + 1e-6), tt::tolerance(1e-6));
  BOOST_TEST(n[1] == -1.5 / (1.0 + 1e-6), tt::tolerance(1e-6));
  // G = 2: the baseline of each is the other's reward.
  const std::vector<float> two = hone::compute_advantages(std::vector<float>{0.25f, 1.0f}, 2, opts(false, true));
  BOOST_TEST(two[0] == -0.75f);
  BOOST_TEST(two[1] == 0.75f);
}

BOOST_AUTO_TEST_CASE(groups_are_contiguous_and_independent) {
  const std::vector<float> r = {1, 0, 5, 5, 2, 4};
  const std::vector<float> a = hone::compute_advantages(r, 2, opts(false, false));
  const std::vector<float> expect = {0.5f, -0.5f, 0.0f, 0.0f, -1.0f, 1.0f};
  BOOST_TEST(a == expect, tt::per_element());
  const std::vector<hone::GroupRewardStats> s = hone::group_reward_stats(r, 2);
  BOOST_TEST(s.size() == 3u);
  BOOST_TEST(s[2].mean == 3.0);
  BOOST_TEST(s[2].std == std::sqrt(2.0), tt::tolerance(1e-12));
  BOOST_TEST(s[2].min == 2.0);
  BOOST_TEST(s[2].max == 4.0);
  BOOST_TEST(s[1].zero_variance);
  BOOST_TEST(!s[0].zero_variance);
}

// Equal rewards give exactly 0 (no 0/eps blow-up), for every option combination.
BOOST_AUTO_TEST_CASE(zero_variance_groups_get_zero_advantage) {
  const std::vector<float> r = {0.1f, 0.1f, 0.1f, 0.7f, 0.7f, 0.7f};
  for (bool normalize : {false, true})
    for (bool loo : {false, true})
      for (float a : hone::compute_advantages(r, 3, opts(normalize, loo))) BOOST_TEST(a == 0.0f);
}

BOOST_AUTO_TEST_CASE(group_of_one_gets_zero_advantage) {
  const std::vector<float> r = {1.0f, 0.0f, 0.5f};
  for (bool normalize : {false, true})
    for (bool loo : {false, true})
      for (float a : hone::compute_advantages(r, 1, opts(normalize, loo))) BOOST_TEST(a == 0.0f);
  BOOST_TEST(hone::zero_variance_groups(r, 1).size() == 3u);
  BOOST_TEST(hone::group_reward_stats(r, 1)[0].std == 0.0);
}

BOOST_AUTO_TEST_CASE(normalized_advantages_have_unit_unbiased_std_and_zero_mean) {
  const std::vector<float> r = {0.3f, 1.9f, -0.4f, 0.8f, 2.2f, 0.0f, 1.1f, -1.3f};
  const std::vector<float> a = hone::compute_advantages(r, 8, opts(true, false));
  double m = 0, ss = 0;
  for (float x : a) m += x;
  m /= 8;
  for (float x : a) ss += (x - m) * (x - m);
  BOOST_TEST(m == 0.0, tt::tolerance(1e-6));
  BOOST_TEST(std::sqrt(ss / 7) == 1.0, tt::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(dynamic_sampling_helpers) {
  const std::vector<float> r = {1, 1, 0, 1, 0, 0, 1, 0};
  BOOST_TEST(hone::zero_variance_groups(r, 2) == std::vector<int64_t>({0, 2}));
  BOOST_TEST(hone::groups_with_signal(r, 2) == std::vector<int64_t>({1, 3}));
  BOOST_TEST(hone::zero_variance_groups(r, 4).empty());
}

BOOST_AUTO_TEST_CASE(bad_shapes_and_values_are_errors) {
  const std::vector<float> r = {1, 0, 1};
  BOOST_CHECK_THROW(hone::compute_advantages(r, 2, opts(true, false)), hone::Error);
  BOOST_CHECK_THROW(hone::compute_advantages(r, 0, opts(true, false)), hone::Error);
  const std::vector<float> nan = {1, NAN};
  BOOST_CHECK_THROW(hone::compute_advantages(nan, 2, opts(true, false)), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
