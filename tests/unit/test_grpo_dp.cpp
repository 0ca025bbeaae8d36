// Data parallelism: `mpirun -np 2 hone run` equals a one-rank run of the same global batch (rewards identical,
// losses and weights within fp32 rounding of the different gradient summation order).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "model/safetensors.h"
#include "test_grpo_util.h"

using namespace test_grpo;

BOOST_AUTO_TEST_SUITE(grpo_dp)

BOOST_AUTO_TEST_CASE(two_ranks_equal_one_rank) {
  const std::string one = test::temp_dir("grpo-dp1"), two = test::temp_dir("grpo-dp2");
  const std::string args = "run.max_steps=3 train.global_batch_size=8";
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(one), args, &out), 0);
  const int rc = hone_run(write_deck(two), args, &out, "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root ");
  BOOST_TEST_INFO(out.substr(out.size() > 1500 ? out.size() - 1500 : 0));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(out.find("2 data-parallel ranks") != std::string::npos);
  const std::string h1 = one + "/out/t.h5", h2 = two + "/out/t.h5";
  for (const char* m : {"reward/mean", "accuracy", "prompt_tokens", "generated_tokens/mean", "truncation_rate",
                        "advantages/mean", "samples"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m) == metric(h2, m));
  }
  for (const char* m : {"loss", "grad_norm", "entropy", "token_mult_prob_error"}) {
    const auto a = metric(h1, m), b = metric(h2, m);
    BOOST_REQUIRE_EQUAL(a.size(), 3u);
    BOOST_REQUIRE_EQUAL(b.size(), 3u);
    for (size_t i = 0; i < 3; ++i) BOOST_TEST(std::abs(a[i] - b[i]) <= 1e-4 * (1 + std::abs(a[i])), m << " step " << i + 1);
  }
  hone::SafetensorsFile w1(one + "/ck/step_00000003/model.safetensors"), w2(two + "/ck/step_00000003/model.safetensors");
  BOOST_REQUIRE_EQUAL(w1.tensors().size(), w2.tensors().size());
  double max_diff = 0;
  for (const auto& t : w1.tensors()) {
    std::vector<float> a(size_t(t.numel())), b(size_t(t.numel()));
    w1.read_f32(t.name, a.data());
    w2.read_f32(t.name, b.data());
    for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, double(std::abs(a[i] - b[i])));
  }
  BOOST_TEST(max_diff < 1e-5);
}

BOOST_AUTO_TEST_SUITE_END()
