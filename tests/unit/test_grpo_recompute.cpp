// train.recompute in `hone run` on the CPU engine: none, selective and full give the same run bit for bit (the
// recomputed activations are the same values), train.activation_recompute = true (the older spelling) is full, and
// it conflicts with train.recompute = "selective" with one error naming both keys.
#include <boost/test/unit_test.hpp>

#include "test_grpo_util.h"

using namespace test_grpo;

BOOST_AUTO_TEST_SUITE(grpo_recompute)

BOOST_AUTO_TEST_CASE(every_choice_gives_the_same_run) {
  const std::string args = "run.max_steps=2 loss.entropy_coef=0.01 ";
  std::vector<std::string> dirs;
  for (const char* choice : {"train.recompute=none", "train.recompute=selective", "train.recompute=full",
                             "train.activation_recompute=true"}) {
    const std::string dir = test::temp_dir(std::string("grpo-recompute-") + std::to_string(dirs.size()));
    std::string out;
    const int rc = hone_run(write_deck(dir), args + choice, &out);
    BOOST_TEST_INFO(choice << ": " << out.substr(out.size() > 1500 ? out.size() - 1500 : 0));
    BOOST_REQUIRE_EQUAL(rc, 0);
    dirs.push_back(dir);
  }
  for (size_t i = 1; i < dirs.size(); ++i)
    for (const std::string& m : deterministic_metrics()) {
      BOOST_TEST_INFO(dirs[i] << " " << m);
      BOOST_TEST(metric(dirs[i] + "/out/t.h5", m) == metric(dirs[0] + "/out/t.h5", m));
    }
}

BOOST_AUTO_TEST_CASE(the_older_key_conflicts_with_selective) {
  const std::string dir = test::temp_dir("grpo-recompute-conflict");
  std::string out;
  const int rc = hone_run(write_deck(dir), "train.activation_recompute=true train.recompute=selective", &out);
  BOOST_TEST(rc == 2);
  BOOST_TEST(out.find("train.activation_recompute") != std::string::npos, out);
  BOOST_TEST(out.find("train.recompute") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
