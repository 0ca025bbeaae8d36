// The demo deck learns: `hone run input/demo.toml` (its own seed, every step) raises the mean reward from under
// 0.2 to over 0.7, read back from the output file.
#include <boost/test/unit_test.hpp>

#include <numeric>

#include "test_grpo_util.h"

using namespace test_grpo;

BOOST_AUTO_TEST_SUITE(grpo_demo)

BOOST_AUTO_TEST_CASE(demo_reward_rises) {
  const std::string dir = test::temp_dir("grpo-demo");
  std::string out;
  const int rc = hone_run(test::source_dir() + "/input/demo.toml",
                          "output.dir=" + dir + "/out checkpoint.dir=" + dir + "/ck", &out);
  BOOST_TEST_INFO(out.substr(out.size() > 2000 ? out.size() - 2000 : 0));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const auto r = metric(dir + "/out/demo.h5", "reward/mean");
  BOOST_REQUIRE_GE(r.size(), 20u);
  const double early = std::accumulate(r.begin(), r.begin() + 5, 0.0) / 5;
  const double late = std::accumulate(r.end() - 10, r.end(), 0.0) / 10;
  BOOST_TEST_MESSAGE("demo reward: first 5 steps " << early << ", last 10 steps " << late);
  BOOST_TEST(early < 0.2);
  BOOST_TEST(late > 0.7);
}

BOOST_AUTO_TEST_SUITE_END()
