// Pipeline parallelism and the generation layout of `hone run` on the CPU engine (ranks under mpirun against one
// rank, the same global batch, a 4-layer model with a KL term so that the reference and the logprob pass run too):
//   * pp = 2 gives the same rollouts (prompts, completions, rewards), the same training metrics within fp32
//     rounding and the same weights within 1e-5, with the schedule's bubble in the output;
//   * tp = 2 x pp = 2 on four ranks, with the distributed optimizer, likewise (generation on replicas of 2 ranks,
//     resharded every step);
//   * interleaving (vpp = 2) over an uneven split with an empty chunk, likewise;
//   * generation layouts that differ from training (generation.tp = 2 at tp = 1, generation.tp = 1 at tp = 2) give
//     the same rollouts: the sampling draws are keyed by sample and position, never by the layout;
//   * a checkpoint written at tp = 2 x pp = 2 resumes at tp = 1 x pp = 4 and at tp = 4 x pp = 1, continuing as the
//     uninterrupted run does.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <vector>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

std::string mpi(int n) {
  return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root ";
}
// Two optimizer steps per GRPO step (the previous policy's logprob pass runs), every rollout stored, rewards that
// differ within groups (kPolicyGradientArgs: the policy-gradient term is in the loss), an entropy bonus so that every
// step has a gradient, a KL term (the reference's pass), 4 layers of 4 heads.
const std::string kArgs = "run.max_steps=3 train.global_batch_size=8 output.sample_every=1 output.num_samples=16 "
                          "loss.entropy_coef=0.01 loss.kl_coef=0.01 model.num_layers=4 model.num_attention_heads=4 " +
                          std::string(kPolicyGradientArgs);

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
void check_equal_runs(const std::string& one, const std::string& other, int64_t step = 3) {
  const std::string h1 = one + "/out/t.h5", h2 = other + "/out/t.h5";
  for (const char* m : {"accuracy", "prompt_tokens", "generated_tokens/mean"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m) == metric(h2, m));
  }
  check_reward_means_close(h1, h2, 1, size_t(step));
  test_h5::File f1(h1), f2(h2);
  const auto completions = test_h5::strings(f1.id, "/samples/completion");
  BOOST_TEST(completions.size() == size_t(step) * 16u);
  BOOST_TEST(completions == test_h5::strings(f2.id, "/samples/completion"));
  BOOST_TEST(test_h5::strings(f1.id, "/samples/prompt") == test_h5::strings(f2.id, "/samples/prompt"));
  BOOST_TEST(test_h5::doubles(f1.id, "/samples/reward") == test_h5::doubles(f2.id, "/samples/reward"));
  check_metrics_close(h1, h2, training_metrics(), 1e-4, 1, size_t(step));
  check_metrics_close(h1, h2, {"kl"}, 1e-4, 1, size_t(step));
  check_advantages_nonzero(h1, 1, size_t(step));
  check_advantages_nonzero(h2, 1, size_t(step));
  BOOST_TEST(metric(h1, "grad_norm")[0] > 0.0);
  char ck[64];
  std::snprintf(ck, sizeof(ck), "/ck/step_%08lld/model.safetensors", static_cast<long long>(step));
  BOOST_TEST(max_weight_diff(one + ck, other + ck) < 1e-5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_pp)

BOOST_AUTO_TEST_CASE(pp2_equals_one_rank) {
  const std::string one = run_in("grpo-pp1", kArgs, 1);
  const std::string two = run_in("grpo-pp2", kArgs + " parallel.pp=2", 2, "pipeline parallel over 2 stages (1F1B)");
  check_equal_runs(one, two);
  // Four micro-batches per pass (sequences of up to 19 tokens, two to a micro-batch of 48) over two stages: 1F1B
  // idles 1/5 of the time.
  const auto bubble = metric(two + "/out/t.h5", "pipeline/bubble");
  BOOST_REQUIRE(!bubble.empty());
  BOOST_TEST(bubble[0] > 0.0);
  BOOST_TEST(bubble[0] < 1.0);
  BOOST_TEST(metric(two + "/out/t.h5", "refit/bytes")[0] > 0.0);  // generation on replicas of one rank
}

BOOST_AUTO_TEST_CASE(tp2_by_pp2_on_four_ranks) {
  const std::string one = run_in("grpo-pp1-tp", kArgs, 1);
  const std::string four = run_in("grpo-tp2-pp2", kArgs + " parallel.tp=2 parallel.pp=2 train.distributed_optimizer=true",
                                  4, "tensor parallel over 2 ranks with sequence parallelism, pipeline parallel over 2 stages");
  check_equal_runs(one, four);
}

// dp = 2 x pp = 2 with the distributed optimizer over stages of different sizes (3 layers and 1, layers smaller
// than the embedding): the reduce-scatter shards each stage's buffer at its own middle, which falls after the tied
// embedding on the first stage and inside its copy on the last, so the two copies' gradients must be summed before
// the reduce-scatter.
BOOST_AUTO_TEST_CASE(pp2_by_dp2_with_the_distributed_optimizer) {
  const std::string args = kArgs + " model.intermediate_size=4 model.num_key_value_heads=1";
  const std::string one = run_in("grpo-pp1-dp", args, 1);
  const std::string four = run_in("grpo-pp2-dp2", args + " parallel.pp=2 parallel.pp_layers=[3,1] "
                                  "train.distributed_optimizer=true", 4, "distributed optimizer (ZeRO-1) over 2 ranks");
  check_equal_runs(one, four);
}

BOOST_AUTO_TEST_CASE(interleaved_over_an_uneven_split) {
  const std::string one = run_in("grpo-pp1-vpp", kArgs, 1);
  const std::string two = run_in("grpo-pp2-vpp2", kArgs + " parallel.pp=2 parallel.vpp=2 parallel.pp_layers=[2,1,0,1]",
                                 2, "interleaved 1F1B, 2 chunks each");
  check_equal_runs(one, two);
}

BOOST_AUTO_TEST_CASE(rollouts_do_not_depend_on_the_generation_layout) {
  const std::string one = run_in("grpo-gen-1", kArgs, 1);
  check_equal_runs(one, run_in("grpo-gen-tg2", kArgs + " generation.tp=2", 2, "generation on 1 replica of 2 ranks"));
  check_equal_runs(one, run_in("grpo-gen-tp2-tg1", kArgs + " parallel.tp=2 generation.tp=1", 2,
                               "generation on 2 replicas of 1 rank"));
}

BOOST_AUTO_TEST_CASE(checkpoint_at_tp2_pp2_resumes_at_pp4_and_at_tp4) {
  const std::string args = kArgs + " run.max_steps=4";
  const std::string whole = run_in("grpo-pp-whole", args, 1);
  const std::string dir = test::temp_dir("grpo-pp-to-pp4");
  const std::string deck = write_deck(dir);
  std::string out;
  int rc = hone_run(deck, args + " run.max_steps=2 parallel.tp=2 parallel.pp=2", &out, mpi(4));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string again = test::temp_dir("grpo-pp-to-tp4");
  std::filesystem::remove_all(again);
  std::filesystem::copy(dir, again, std::filesystem::copy_options::recursive);
  rc = hone_run(deck, args + " run.resume=auto parallel.pp=4", &out, mpi(4));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(out.find("resuming from") != std::string::npos);
  rc = hone_run(write_deck(again), args + " run.resume=auto parallel.tp=4", &out, mpi(4));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string hw = whole + "/out/t.h5";
  check_advantages_nonzero(hw, 1, 4);
  for (const std::string& d : {dir, again}) {
    BOOST_TEST_CONTEXT(d) {
      const std::string h = d + "/out/t.h5";
      BOOST_TEST(steps(h) == (std::vector<int64_t>{1, 2, 3, 4}));
      BOOST_TEST(metric(h, "reward/mean") == metric(hw, "reward/mean"));
      check_metrics_close(hw, h, training_metrics(), 1e-4, 1, 4);
      check_advantages_nonzero(h, 1, 4);
      BOOST_TEST(max_weight_diff(whole + "/ck/step_00000004/model.safetensors", d + "/ck/step_00000004/model.safetensors") < 1e-5);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
