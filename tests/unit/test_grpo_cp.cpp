// Context parallelism of `hone run` on the CPU engine (ranks under mpirun against one rank, the same global batch):
//   * cp = 2 gives the same rollouts (every rank of a cp group generates the same ones), rewards, and losses,
//     gradient norms and weights within fp32 rounding (each rank trains on its chunks of every micro-batch, the
//     gradients summed over dp x cp), two optimizer steps per GRPO step over three steps;
//   * cp = 2 x tp = 2 on four ranks likewise, with sequence parallelism inside each tp group and the distributed
//     optimizer (ZeRO-1 over the two cp ranks of each tp rank's shard);
//   * the model-level equivalence of tests/mpi/test_context_parallel.cpp with a ring of four ranks (the mpi suite of
//     make test runs it on two).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

std::string mpi(int n) {
  return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root ";
}
// As the tensor-parallel tests: two optimizer steps per GRPO step, every rollout stored, rewards that differ within
// groups (kPolicyGradientArgs: the policy-gradient term is in the loss), an entropy bonus.
const std::string kArgs = "run.max_steps=3 train.global_batch_size=8 output.sample_every=1 output.num_samples=16 "
                          "loss.entropy_coef=0.01 " + std::string(kPolicyGradientArgs);

std::string tail(const std::string& s) { return s.substr(s.size() > 1500 ? s.size() - 1500 : 0); }

std::string run_in(const std::string& name, const std::string& args, int ranks, const std::string& expect = "") {
  const std::string dir = test::temp_dir(name);
  std::string out;
  const int rc = hone_run(write_deck(dir), args, &out, ranks > 1 ? mpi(ranks) : "");
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  if (!expect.empty()) BOOST_TEST(out.find(expect) != std::string::npos, expect);
  return dir;
}

// The same rollouts and rewards, training metrics and final weights within fp32 rounding.
void check_equal_runs(const std::string& one, const std::string& other) {
  const std::string h1 = one + "/out/t.h5", h2 = other + "/out/t.h5";
  for (const char* m : {"reward/mean", "accuracy", "prompt_tokens", "generated_tokens/mean", "advantages/mean"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m) == metric(h2, m));
  }
  test_h5::File f1(h1), f2(h2);
  const auto completions = test_h5::strings(f1.id, "/samples/completion");
  BOOST_TEST(completions.size() == 3u * 16u);
  BOOST_TEST(completions == test_h5::strings(f2.id, "/samples/completion"));
  BOOST_TEST(test_h5::doubles(f1.id, "/samples/reward") == test_h5::doubles(f2.id, "/samples/reward"));
  check_metrics_close(h1, h2, training_metrics(), 1e-4, 1, 3);
  check_advantages_nonzero(h1, 1, 3);
  check_advantages_nonzero(h2, 1, 3);
  BOOST_TEST(metric(h1, "grad_norm")[0] > 0.0);
  BOOST_TEST(max_weight_diff(one + "/ck/step_00000003/model.safetensors", other + "/ck/step_00000003/model.safetensors") <
             1e-5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_cp)

BOOST_AUTO_TEST_CASE(cp2_equals_one_rank) {
  const std::string one = run_in("grpo-cp1", kArgs, 1);
  const std::string two = run_in("grpo-cp2", kArgs + " parallel.cp=2", 2, "context parallel over 2 ranks");
  check_equal_runs(one, two);
}

BOOST_AUTO_TEST_CASE(cp2_by_tp2_equals_one_rank) {
  const std::string one = run_in("grpo-cp1-tp1", kArgs, 1);
  const std::string four =
      run_in("grpo-cp2-tp2", kArgs + " parallel.cp=2 parallel.tp=2 train.distributed_optimizer=true", 4,
             "distributed optimizer (ZeRO-1) over 2 ranks");
  check_equal_runs(one, four);
}

// The ring of the model-level test with four ranks: blocks from earlier and later ranks, gradients traveling three
// hops before they come home.
BOOST_AUTO_TEST_CASE(ring_of_four_ranks) {
  std::string out;
  const int rc = test::run_command(mpi(4) + test::build_dir() +
                                       "/tests/mpi_tests --run_test=context_parallel --color_output=no",
                                   &out);
  BOOST_TEST_INFO(tail(out));
  BOOST_TEST(rc == 0);
  BOOST_TEST(out.find("No errors detected") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
