// Non-finite numbers in a run (as Megatron's NaN checks):
//   * a diverging run ends with one line naming what went non-finite and the keys that usually cause it (exit 2), not
//     with an internal check (exit 1) inside the sampler: train.learning_rate = 1e9 and no clipping;
//   * an optimizer update whose gradient norm is not finite (a loss coefficient that overflows fp32 here) is skipped
//     with weights and moments untouched and counted in skipped_updates; train.max_nonfinite_updates in a row end the
//     run with exit 2 and one line; 0 lets it go on.
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

BOOST_AUTO_TEST_CASE(non_finite_updates_are_skipped_then_end_the_run) {
  const std::string dir = test::temp_dir("grpo-nonfinite");
  std::string out;
  const std::string overflow = " loss.entropy_coef=1e300";  // finite in the deck, infinite in the fp32 gradients
  int rc = hone_run(write_deck(dir), "run.max_steps=6" + overflow, &out);
  BOOST_TEST(rc == 2, out);
  BOOST_TEST(out.find("step 1: the gradient norm is") != std::string::npos, out);
  BOOST_TEST(out.find("optimizer update skipped (2 in a row") != std::string::npos, out);
  std::string last = out.substr(0, out.find_last_not_of('\n') + 1);
  last = last.substr(last.find_last_of('\n') + 1);
  BOOST_TEST(last.find("hone: error: step 3: 3 optimizer updates in a row had a non-finite gradient norm") == 0u, last);
  BOOST_TEST(last.find("train.max_nonfinite_updates = 3") != std::string::npos, last);

  // With the limit off the run goes on: every update skipped and counted, the weights and moments of step 3 those
  // of step 1 (the initial ones) bit for bit.
  const std::string dir2 = test::temp_dir("grpo-nonfinite-on");
  rc = hone_run(write_deck(dir2), "run.max_steps=3 checkpoint.every=1 checkpoint.keep=3 train.max_nonfinite_updates=0" + overflow, &out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string h5 = dir2 + "/out/t.h5";
  BOOST_TEST(metric(h5, "skipped_updates") == metric(h5, "optimizer_steps"));
  BOOST_TEST(metric(h5, "skipped_updates").size() == 3u);
  BOOST_TEST(metric(h5, "skipped_updates")[0] >= 1.0);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    BOOST_TEST_INFO(f);
    BOOST_TEST(max_weight_diff(dir2 + "/ck/step_00000001/" + f, dir2 + "/ck/step_00000003/" + f) == 0.0);
  }
}

BOOST_AUTO_TEST_SUITE_END()
