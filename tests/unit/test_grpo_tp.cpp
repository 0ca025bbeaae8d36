// Tensor parallelism of `hone run` on the CPU engine (ranks under mpirun against one rank, the same global batch):
//   * tp = 2 gives the same rollouts (every sample's prompt, completion and reward: the logits are gathered, so the
//     sampled tokens do not depend on tp), rewards, and losses, gradient norms and weights within fp32 rounding;
//   * tp = 2 x dp = 2 on four ranks likewise, with the distributed optimizer (ZeRO-1 within each tp rank's shard)
//     and the sequence-parallel collectives in three chunks (parallel.tp_comm_overlap: on the CPU the same chunks
//     move one after the other);
//   * a KV head replicated over the two ranks (one KV head) likewise, without sequence parallelism (the other runs
//     use it: the deck's default);
//   * a checkpoint written at tp = 2 holds whole tensors, and resumes at tp = 1 with dp = 2, continuing as the
//     uninterrupted tp = 1, dp = 2 run (within fp32 rounding: the first two steps ran at tp = 2), and bitwise as a
//     tp = 1, dp = 2 run from the same checkpoint that is itself interrupted and resumed.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <vector>

#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

std::string mpi(int n) {
  return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root ";
}
// As the data-parallel tests: two optimizer steps per GRPO step, every rollout stored, rewards that differ within
// groups (kPolicyGradientArgs: the policy-gradient term is in the loss), an entropy bonus so that every step has a
// gradient.
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

void check_close(const std::string& h1, const std::string& h2, double rel, size_t first, size_t last) {
  check_metrics_close(h1, h2, training_metrics(), rel, first, last);
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
  BOOST_TEST(test_h5::doubles(f1.id, "/samples/reward") == test_h5::doubles(f2.id, "/samples/reward"));
  check_close(h1, h2, 1e-4, 1, size_t(step));
  check_advantages_nonzero(h1, 1, size_t(step));
  check_advantages_nonzero(h2, 1, size_t(step));
  BOOST_TEST(metric(h1, "grad_norm")[0] > 0.0);
  char ck[64];
  std::snprintf(ck, sizeof(ck), "/ck/step_%08lld/model.safetensors", static_cast<long long>(step));
  BOOST_TEST(max_weight_diff(one + ck, other + ck) < 1e-5);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_tp)

BOOST_AUTO_TEST_CASE(tp2_equals_one_rank) {
  const std::string one = run_in("grpo-tp1", kArgs, 1);
  const std::string two = run_in("grpo-tp2", kArgs + " parallel.tp=2", 2,
                                 "tensor parallel over 2 ranks with sequence parallelism");
  check_equal_runs(one, two);
}

BOOST_AUTO_TEST_CASE(replicated_kv_head_equals_one_rank) {
  const std::string args = kArgs + " model.num_key_value_heads=1 run.max_steps=2";
  const std::string one = run_in("grpo-tp1-kv1", args, 1);
  const std::string two = run_in("grpo-tp2-kv1", args + " parallel.tp=2 parallel.sequence_parallel=false", 2,
                                 "tensor parallel over 2 ranks");
  check_equal_runs(one, two, 2);
}

BOOST_AUTO_TEST_CASE(tp2_by_dp2_equals_one_rank) {
  const std::string args =
      kArgs + " train.distributed_optimizer=true parallel.tp_comm_overlap=true parallel.tp_comm_overlap_chunks=3";
  const std::string one = run_in("grpo-tp1-zero", kArgs, 1);
  const std::string four = run_in("grpo-tp2-dp2", args + " parallel.tp=2", 4, "2 data-parallel ranks");
  check_equal_runs(one, four);
}

BOOST_AUTO_TEST_CASE(tp2_checkpoint_resumes_at_tp1_dp2) {
  const std::string args = kArgs + " run.max_steps=4";
  const std::string whole = run_in("grpo-tp-dp2-whole", args, 2, "2 data-parallel ranks");
  const std::string dir = test::temp_dir("grpo-tp2-to-dp2");
  const std::string deck = write_deck(dir);
  std::string out;
  int rc = hone_run(deck, args + " run.max_steps=2 parallel.tp=2", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  // A copy of the tp = 2 run's folder, resumed at tp = 1 dp = 2 twice (to step 3, then 4) below.
  const std::string again = test::temp_dir("grpo-tp2-to-dp2-again");
  std::filesystem::remove_all(again);
  std::filesystem::copy(dir, again, std::filesystem::copy_options::recursive);
  rc = hone_run(deck, args + " run.resume=auto", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(out.find("resuming from") != std::string::npos);
  BOOST_TEST(out.find("2 data-parallel ranks") != std::string::npos);
  const std::string h = dir + "/out/t.h5", hw = whole + "/out/t.h5";
  BOOST_TEST(steps(h) == (std::vector<int64_t>{1, 2, 3, 4}));
  check_reward_means_close(hw, h, 1, 4);
  check_close(hw, h, 1e-4, 3, 4);
  check_advantages_nonzero(hw, 3, 4);
  check_advantages_nonzero(h, 3, 4);
  BOOST_TEST(max_weight_diff(whole + "/ck/step_00000004/model.safetensors", dir + "/ck/step_00000004/model.safetensors") < 1e-5);
  // From the tp = 2 checkpoint, a tp = 1 dp = 2 run interrupted after step 3 and resumed ends bitwise where the
  // uninterrupted one does: the checkpoint carries the whole state, whatever layout wrote it.
  const std::string deck2 = write_deck(again);  // the same deck, with the copy's folders
  rc = hone_run(deck2, args + " run.resume=auto run.max_steps=3", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  rc = hone_run(deck2, args + " run.resume=auto", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(steps(again + "/out/t.h5") == (std::vector<int64_t>{1, 2, 3, 4}));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    BOOST_TEST_INFO(f);
    BOOST_TEST(max_weight_diff(dir + "/ck/step_00000004/" + f, again + "/ck/step_00000004/" + f) == 0.0);
  }
}

// A model folder (a checkpoint of a first run) loaded at tp = 2, each rank reading its slices of the files, runs as
// the same folder at tp = 1.
BOOST_AUTO_TEST_CASE(model_folder_loaded_as_slices_equals_one_rank) {
  const std::string first = run_in("grpo-tp-model-src", kArgs + " run.max_steps=1", 1);
  std::string deck = tiny_deck("@DIR@");
  const size_t a = deck.find("[model]"), b = deck.find("[tokenizer]");
  deck = deck.substr(0, a) + "[model]\npath = \"" + first + "/ck/step_00000001\"\n" + deck.substr(b);
  auto run_deck = [&](const std::string& name, const std::string& args, int ranks) {
    const std::string dir = test::temp_dir(name);
    std::string text = deck;
    for (size_t at; (at = text.find("@DIR@")) != std::string::npos;) text.replace(at, 5, dir);
    std::string out;
    const int rc = hone_run(write_deck(dir, text), args, &out, ranks > 1 ? mpi(ranks) : "");
    BOOST_TEST_INFO(tail(out));
    BOOST_REQUIRE_EQUAL(rc, 0);
    return dir;
  };
  const std::string one = run_deck("grpo-tp-model1", kArgs + " run.max_steps=2", 1);
  const std::string two = run_deck("grpo-tp-model2", kArgs + " run.max_steps=2 parallel.tp=2", 2);
  check_equal_runs(one, two, 2);
}

BOOST_AUTO_TEST_SUITE_END()
