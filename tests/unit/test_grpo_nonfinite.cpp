// A diverging run ends with one line naming what went non-finite and the keys that usually cause it (exit 2), not
// with an internal check (exit 1) inside the sampler: the demo's problem with train.learning_rate = 1e9 and no
// clipping.
#include <boost/test/unit_test.hpp>

#include "test_grpo_util.h"

using namespace test_grpo;

BOOST_AUTO_TEST_SUITE(grpo_nonfinite)

BOOST_AUTO_TEST_CASE(a_diverging_run_ends_with_one_user_error) {
  const std::string dir = test::temp_dir("grpo-diverge");
  std::string out;
  const int rc = hone_run(write_deck(dir), "run.max_steps=6 train.learning_rate=1e9 train.max_grad_norm=0", &out);
  BOOST_TEST(rc == 2, out);
  std::string last = out.substr(0, out.find_last_not_of('\n') + 1);
  last = last.substr(last.find_last_of('\n') + 1);
  BOOST_TEST(last.find("hone: error:") == 0u, last);
  BOOST_TEST(last.find("not finite") != std::string::npos, last);
  BOOST_TEST(last.find("train.learning_rate") != std::string::npos, last);
  BOOST_TEST(out.find("check failed") == std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
