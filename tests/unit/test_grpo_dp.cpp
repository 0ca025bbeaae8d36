// Data parallelism of `hone run` (two ranks under mpirun against one rank, the same global batch):
//   * dp = 2 gives the same rollouts (every sample's prompt, completion and reward: the sampled tokens do not
//     depend on the rank count), rewards, and losses, gradient norms and weights within fp32 rounding of the
//     different gradient summation order;
//   * the distributed optimizer (ZeRO-1) gives the same losses and weights as the plain one;
//   * bf16 gradient reduction runs and stays within bf16 rounding of the fp32 reduction;
//   * a checkpoint of the sharded optimizer resumes under one rank, and a one-rank checkpoint under two sharded
//     ranks, continuing as the uninterrupted run.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

const std::string kMpi = "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root ";
// Two optimizer steps per GRPO step (global batch 8 of 16 rollouts), every rollout stored as a sample each step.
// kPolicyGradientArgs gives the groups differing rewards, so that the policy-gradient term is in the loss and the
// gradients compared (check_advantages_nonzero says so); the entropy bonus keeps the gradient of a step nonzero even
// where its rewards are all alike.
const std::string kArgs = "run.max_steps=3 train.global_batch_size=8 output.sample_every=1 output.num_samples=16 "
                          "loss.entropy_coef=0.01 " + std::string(kPolicyGradientArgs);

std::string tail(const std::string& s) { return s.substr(s.size() > 1500 ? s.size() - 1500 : 0); }

// Runs the tiny deck in a fresh folder (two ranks unless one) and returns the folder.
std::string run_in(const std::string& name, const std::string& args, bool two_ranks) {
  const std::string dir = test::temp_dir(name);
  std::string out;
  const int rc = hone_run(write_deck(dir), args, &out, two_ranks ? kMpi : "");
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  if (two_ranks) BOOST_TEST(out.find("2 data-parallel ranks") != std::string::npos);
  return dir;
}

// The metrics of `names` agree within rel * (1 + |value|) over the steps [first, last] (1-based).
void check_close(const std::string& h1, const std::string& h2, const std::vector<std::string>& names, double rel,
                 size_t first = 1, size_t last = 3) {
  check_metrics_close(h1, h2, names, rel, first, last);
}

const std::vector<std::string>& kTrainingMetrics = training_metrics();

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_dp)

BOOST_AUTO_TEST_CASE(two_ranks_equal_one_rank) {
  const std::string one = run_in("grpo-dp1", kArgs, false), two = run_in("grpo-dp2", kArgs, true);
  const std::string h1 = one + "/out/t.h5", h2 = two + "/out/t.h5";
  for (const char* m : {"accuracy", "prompt_tokens", "generated_tokens/mean", "truncation_rate", "samples"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m) == metric(h2, m));
  }
  check_reward_means_close(h1, h2, 1, 3);
  // Every rollout of every step, gathered from the rank that generated it.
  test_h5::File f1(h1), f2(h2);
  const auto completions = test_h5::strings(f1.id, "/samples/completion");
  BOOST_TEST(completions.size() == 3u * 16u);
  BOOST_TEST(completions == test_h5::strings(f2.id, "/samples/completion"));
  BOOST_TEST(test_h5::strings(f1.id, "/samples/prompt") == test_h5::strings(f2.id, "/samples/prompt"));
  BOOST_TEST(test_h5::doubles(f1.id, "/samples/reward") == test_h5::doubles(f2.id, "/samples/reward"));
  BOOST_TEST(test_h5::int64s(f1.id, "/samples/step") == test_h5::int64s(f2.id, "/samples/step"));
  check_close(h1, h2, kTrainingMetrics, 1e-4);
  check_advantages_nonzero(h1, 1, 3);
  check_advantages_nonzero(h2, 1, 3);
  BOOST_TEST(metric(h1, "grad_norm")[0] > 0.0);  // something to reduce
  BOOST_TEST(max_weight_diff(one + "/ck/step_00000003/model.safetensors", two + "/ck/step_00000003/model.safetensors") < 1e-5);
}

BOOST_AUTO_TEST_CASE(distributed_optimizer_equals_the_plain_one) {
  const std::string plain = run_in("grpo-dp2-plain", kArgs, true);
  const std::string zero = run_in("grpo-dp2-zero", kArgs + " train.distributed_optimizer=true", true);
  const std::string hp = plain + "/out/t.h5", hz = zero + "/out/t.h5";
  BOOST_TEST(metric(hp, "reward/mean") == metric(hz, "reward/mean"));
  check_close(hp, hz, kTrainingMetrics, 1e-6);
  check_advantages_nonzero(hp, 1, 3);
  check_advantages_nonzero(hz, 1, 3);
  BOOST_TEST(max_weight_diff(plain + "/ck/step_00000003/model.safetensors", zero + "/ck/step_00000003/model.safetensors") < 1e-6);
  // The optimizer state a ZeRO-1 checkpoint holds is the whole (dp-independent) one.
  hone::SafetensorsFile op(plain + "/ck/step_00000003/optimizer.safetensors"),
      oz(zero + "/ck/step_00000003/optimizer.safetensors");
  for (const char* name : {"exp_avg", "exp_avg_sq"}) {
    BOOST_REQUIRE_EQUAL(op.info(name).numel(), oz.info(name).numel());
    std::vector<float> a(size_t(op.info(name).numel())), b(a.size());
    op.read_f32(name, a.data());
    oz.read_f32(name, b.data());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, double(std::abs(a[i] - b[i])));
      scale = std::max(scale, double(std::abs(a[i])));
    }
    BOOST_TEST(worst <= 1e-5 * scale, name << ": " << worst << " of " << scale);
  }
}

// One GRPO step (two optimizer steps on the same rollouts): later steps would sample from slightly different
// weights, and a flipped token is not a rounding difference.
BOOST_AUTO_TEST_CASE(bf16_gradient_reduction_stays_within_bf16_rounding) {
  const std::string args = kArgs + " run.max_steps=1";
  const std::string fp32 = run_in("grpo-dp2-fp32", args, true);
  const std::string bf16 = run_in("grpo-dp2-bf16", args + " train.grad_reduce_in_fp32=false", true);
  const std::string zbf16 = run_in("grpo-dp2-zero-bf16",
                                   args + " train.grad_reduce_in_fp32=false train.distributed_optimizer=true", true);
  const std::string w = "/ck/step_00000001/model.safetensors";
  for (const std::string& d : {fp32, bf16, zbf16}) check_advantages_nonzero(d + "/out/t.h5", 1, 1);
  const double d = max_weight_diff(fp32 + w, bf16 + w);
  BOOST_TEST_MESSAGE("bf16 vs fp32 gradient reduction: weights differ by at most " << d << " after 2 updates");
  BOOST_TEST(d > 0.0);   // the gradients did travel as bf16
  BOOST_TEST(d < 1e-3);  // lr 3e-3, Adam: bf16 rounding of the gradient moves an update by a small part of it
  BOOST_TEST(max_weight_diff(bf16 + w, zbf16 + w) < 1e-6);  // the two optimizers round the same sums alike
  // The step's loss adds the first optimizer step's, computed before any update (the same in both), and the
  // second's, computed after an update that the bf16 rounding of the gradient (2^-9 of it) moved by a small part of
  // itself: its policy-gradient term (the advantage times the ratio to the old policy) follows the weights, so the
  // two agree within 1e-5 of the loss (here 1.1e-6).
  const double l32 = metric(fp32 + "/out/t.h5", "loss")[0], l16 = metric(bf16 + "/out/t.h5", "loss")[0];
  BOOST_TEST(std::abs(l32 - l16) <= 1e-5 * std::abs(l32), l32 << " vs " << l16);
}

BOOST_AUTO_TEST_CASE(checkpoints_resume_under_another_rank_count_and_optimizer) {
  const std::string args = kArgs + " run.max_steps=4";
  const std::string whole = run_in("grpo-dp-whole", args + " train.distributed_optimizer=true", true);
  const std::string hw = whole + "/out/t.h5";
  // Two sharded ranks for 2 steps, then one rank; one rank for 2 steps, then two sharded ranks.
  for (int order = 0; order < 2; ++order) {
    const std::string dir = test::temp_dir(order == 0 ? "grpo-dp-2to1" : "grpo-dp-1to2");
    const std::string deck = write_deck(dir);
    const std::string zero = " train.distributed_optimizer=true";
    std::string out;
    int rc = hone_run(deck, args + " run.max_steps=2" + (order == 0 ? zero : ""), &out, order == 0 ? kMpi : "");
    BOOST_TEST_INFO(tail(out));
    BOOST_REQUIRE_EQUAL(rc, 0);
    rc = hone_run(deck, args + " run.resume=auto" + (order == 1 ? zero : ""), &out, order == 1 ? kMpi : "");
    BOOST_TEST_INFO(tail(out));
    BOOST_REQUIRE_EQUAL(rc, 0);
    BOOST_TEST(out.find("resuming from") != std::string::npos);
    const std::string h = dir + "/out/t.h5";
    BOOST_TEST(steps(h) == (std::vector<int64_t>{1, 2, 3, 4}));
    check_reward_means_close(hw, h, 1, 4);
    check_close(hw, h, kTrainingMetrics, 1e-4, 3, 4);
    check_advantages_nonzero(hw, 3, 4);
    check_advantages_nonzero(h, 3, 4);
    BOOST_TEST(max_weight_diff(whole + "/ck/step_00000004/model.safetensors", dir + "/ck/step_00000004/model.safetensors") < 1e-5);
  }
}

BOOST_AUTO_TEST_SUITE_END()
