// Expert parallelism of `hone run` on the CPU engine, a tiny random Qwen3-MoE (4 experts, 2 per token) on the reverse
// task, ranks under mpirun against the same ranks without expert parallelism (the same data-parallel split: each
// rank routes the same micro-batches, so even the load-balancing loss of each micro-batch is the same):
//   * ep = 2 on 2 ranks: the same rollouts and rewards (generation holds every expert), losses, gradient norms, the
//     load-balancing loss and the expert loads within fp32 rounding, and the same final weights;
//   * ep = 2 x dp = 4 on 4 ranks (expert-data-parallel groups of 2: the experts' gradients summed over them);
//   * tp = 2 x ep = 2 on 4 ranks against tp = 1, ep = 1 on 2 ranks;
//   * an ep = 2 checkpoint holds whole tensors and resumes at ep = 1, as the uninterrupted ep = 1 run goes on;
//   * with the load-balancing loss off, ep = 2 on 2 ranks equals one rank (the policy loss adds up over ranks);
//   * loss.router_replay: training routes every token as generation did, on one rank and at ep = 2;
//   * generation.experts = parallel (generation on this rank's experts, the group's passes in lockstep): the same
//     rollouts, bit for bit, and the same run as with every expert replicated, at ep = 2 and at tp = 2 x ep = 2.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

std::string mpi(int n) {
  return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root ";
}
// Rewards that differ within groups (kPolicyGradientArgs): the policy-gradient term is in the loss.
const std::string kArgs =
    "run.max_steps=3 train.global_batch_size=8 output.sample_every=1 output.num_samples=16 loss.entropy_coef=0.01 "
    "model.architecture=qwen3_moe model.num_layers=2 model.num_experts=4 model.num_experts_per_tok=2 "
    "model.moe_intermediate_size=16 loss.moe_aux_loss_coef=0.05 " + std::string(kPolicyGradientArgs);

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

void check_equal_runs(const std::string& one, const std::string& other, int64_t step = 3) {
  const std::string h1 = one + "/out/t.h5", h2 = other + "/out/t.h5";
  for (const char* m : {"reward/mean", "accuracy", "prompt_tokens", "generated_tokens/mean"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(metric(h1, m) == metric(h2, m));
  }
  test_h5::File f1(h1), f2(h2);
  const auto completions = test_h5::strings(f1.id, "/samples/completion");
  BOOST_TEST(completions.size() == size_t(step) * 16u);
  BOOST_TEST(completions == test_h5::strings(f2.id, "/samples/completion"));
  std::vector<std::string> names = training_metrics();
  for (const char* m : {"moe/aux_loss", "moe/load_imbalance/max", "moe/load_imbalance/layer_0", "moe/routing_mismatch"})
    names.push_back(m);
  check_metrics_close(h1, h2, names, 1e-4, 1, size_t(step));
  check_advantages_nonzero(h1, 1, size_t(step));
  check_advantages_nonzero(h2, 1, size_t(step));
  BOOST_TEST(metric(h1, "grad_norm")[0] > 0.0);
  BOOST_TEST(metric(h1, "moe/aux_loss")[0] > 0.0);
  char ck[64];
  std::snprintf(ck, sizeof(ck), "/ck/step_%08lld/model.safetensors", static_cast<long long>(step));
  BOOST_TEST(max_weight_diff(one + ck, other + ck) < 1e-5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_ep)

BOOST_AUTO_TEST_CASE(ep2_equals_ep1_on_two_ranks) {
  const std::string one = run_in("grpo-ep1", kArgs, 2);
  const std::string two = run_in("grpo-ep2", kArgs + " parallel.ep=2", 2, "expert parallel over 2 ranks");
  check_equal_runs(one, two);
}

BOOST_AUTO_TEST_CASE(ep2_by_dp4_equals_ep1_on_four_ranks) {
  const std::string one = run_in("grpo-ep1-dp4", kArgs, 4);
  const std::string four = run_in("grpo-ep2-dp4", kArgs + " parallel.ep=2", 4, "expert parallel over 2 ranks");
  check_equal_runs(one, four);
}

BOOST_AUTO_TEST_CASE(tp2_by_ep2_equals_tp1_ep1) {
  const std::string one = run_in("grpo-tp1-ep1", kArgs, 2);
  const std::string four = run_in("grpo-tp2-ep2", kArgs + " parallel.tp=2 parallel.ep=2", 4,
                                  "tensor parallel over 2 ranks with sequence parallelism, expert parallel over 2");
  check_equal_runs(one, four);
}

BOOST_AUTO_TEST_CASE(generation_with_split_experts_equals_replicated) {
  const std::string rep = run_in("grpo-ep2-gen-replicated", kArgs + " parallel.ep=2 generation.experts=replicated", 2,
                                 "(generation with every expert)");
  const std::string split = run_in("grpo-ep2-gen-parallel", kArgs + " parallel.ep=2 generation.experts=parallel", 2,
                                   "(generation too, in lockstep)");
  check_equal_runs(rep, split);
  // The lockstep's idle passes are reported with the experts split, and only then.
  const std::vector<double> idle = metric(split + "/out/t.h5", "generation/expert_idle_passes");
  BOOST_TEST(idle.size() == 3u);
  for (double v : idle) BOOST_TEST(v >= 0.0);
  BOOST_TEST(metric(rep + "/out/t.h5", "generation/expert_idle_passes").empty());
  const std::string one = run_in("grpo-tp1-ep1-gen", kArgs, 2);
  const std::string four = run_in("grpo-tp2-ep2-gen-parallel",
                                  kArgs + " parallel.tp=2 parallel.ep=2 generation.experts=parallel", 4,
                                  "(generation too, in lockstep)");
  check_equal_runs(one, four);
}

BOOST_AUTO_TEST_CASE(ep2_checkpoint_resumes_at_ep1) {
  const std::string whole = run_in("grpo-ep1-whole", kArgs + " run.max_steps=3", 2);
  const std::string dir = test::temp_dir("grpo-ep2-to-ep1");
  const std::string deck = write_deck(dir);
  std::string out;
  int rc = hone_run(deck, kArgs + " run.max_steps=2 parallel.ep=2", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  rc = hone_run(deck, kArgs + " run.max_steps=3 run.resume=auto", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(out.find("resuming from") != std::string::npos);
  BOOST_TEST(steps(dir + "/out/t.h5") == (std::vector<int64_t>{1, 2, 3}));
  check_metrics_close(whole + "/out/t.h5", dir + "/out/t.h5", training_metrics(), 1e-4, 3, 3);
  check_advantages_nonzero(whole + "/out/t.h5", 3, 3);
  check_advantages_nonzero(dir + "/out/t.h5", 3, 3);
  BOOST_TEST(max_weight_diff(whole + "/ck/step_00000003/model.safetensors", dir + "/ck/step_00000003/model.safetensors") <
             1e-5);
}

BOOST_AUTO_TEST_CASE(without_the_load_balancing_loss_ep2_equals_one_rank) {
  const std::string args = kArgs + " loss.moe_aux_loss_coef=0";
  const std::string one = run_in("grpo-ep-one", args, 1);
  const std::string two = run_in("grpo-ep2-noaux", args + " parallel.ep=2", 2, "expert parallel over 2 ranks");
  const std::string h1 = one + "/out/t.h5", h2 = two + "/out/t.h5";
  test_h5::File f1(h1), f2(h2);
  BOOST_TEST(test_h5::strings(f1.id, "/samples/completion") == test_h5::strings(f2.id, "/samples/completion"));
  check_metrics_close(h1, h2, training_metrics(), 1e-4, 1, 3);
  check_advantages_nonzero(h1, 1, 3);
  check_advantages_nonzero(h2, 1, 3);
  BOOST_TEST(max_weight_diff(one + "/ck/step_00000003/model.safetensors", two + "/ck/step_00000003/model.safetensors") <
             1e-5);
}

// loss.router_replay on one rank: the training forward takes generation's experts (no expert set differs), and the
// mismatch of a forward that routes by itself is reported beside token_mult_prob_error.
// One optimizer step per GRPO step: training runs on generation's weights.
BOOST_AUTO_TEST_CASE(router_replay_routes_every_token_as_generation_did) {
  const std::string args = kArgs + " loss.router_replay=true run.max_steps=2 train.global_batch_size=16";
  const std::string plain = run_in("grpo-moe-noreplay", kArgs + " run.max_steps=2 train.global_batch_size=16", 1);
  // Generation and training route alike on the same weights without replay too (fp32: only a near tie differs).
  for (double m : metric(plain + "/out/t.h5", "moe/routing_mismatch")) BOOST_TEST(m < 0.02);
  const std::string dir = run_in("grpo-moe-replay", args, 1);
  const std::string h = dir + "/out/t.h5";
  for (double m : metric(h, "moe/routing_mismatch")) BOOST_TEST(m == 0.0);
  const auto unreplayed = metric(h, "moe/token_mult_prob_error_unreplayed");
  BOOST_TEST_REQUIRE(unreplayed.size() == 2u);
  for (double u : unreplayed) BOOST_TEST((u >= 1.0 && u < 1.01));
  const auto mpe = metric(h, "token_mult_prob_error");
  for (double u : mpe) BOOST_TEST((u >= 1.0 && u < 1.01));
}

// loss.router_replay under expert parallelism: each rank's training forwards replay its own rollouts' routing, as
// they do without expert parallelism. Micro-batches of at most 32 tokens give the ranks different numbers of them
// (rank 0 packs its 8 sequences into 7 at one step, rank 1 into 8), so the rank with fewer runs empty passes, and
// under replay each pass runs one more forward (the one that routes by itself): the group's collectives pair up only
// if the empty passes run it too (without, the run ends in an MPI error at that step).
BOOST_AUTO_TEST_CASE(router_replay_at_ep2_equals_ep1) {
  const std::string args =
      kArgs + " loss.router_replay=true run.max_steps=2 train.global_batch_size=16 train.max_tokens_per_microbatch=32";
  const std::string one = run_in("grpo-replay-ep1", args, 2);
  const std::string two = run_in("grpo-replay-ep2", args + " parallel.ep=2", 2, "expert parallel over 2 ranks");
  check_equal_runs(one, two, 2);
  for (double m : metric(two + "/out/t.h5", "moe/routing_mismatch")) BOOST_TEST(m == 0.0);
  // The uneven split this case is about: rank 0 packed fewer micro-batches than its 8 sequences at some step.
  const auto mbs = metric(two + "/out/t.h5", "microbatches");
  BOOST_TEST_REQUIRE(mbs.size() == 2u);
  BOOST_TEST(std::min(mbs[0], mbs[1]) < 8.0);
  const auto unreplayed = metric(two + "/out/t.h5", "moe/token_mult_prob_error_unreplayed");
  const auto unreplayed_one = metric(one + "/out/t.h5", "moe/token_mult_prob_error_unreplayed");
  BOOST_TEST_REQUIRE(unreplayed.size() == 2u);
  BOOST_TEST_REQUIRE(unreplayed_one.size() == 2u);
  for (size_t i = 0; i < 2; ++i) BOOST_TEST(std::fabs(unreplayed[i] - unreplayed_one[i]) < 1e-6);
}

BOOST_AUTO_TEST_SUITE_END()
