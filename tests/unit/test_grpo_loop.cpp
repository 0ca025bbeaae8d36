// `hone run` end to end on tiny decks: the output file's rows and metrics, generation/training logprob agreement,
// the logprob and reference phases, several optimizer steps per GRPO step, dynamic sampling, overlong filtering.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "io/checkpoint.h"
#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}
}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_loop)

BOOST_AUTO_TEST_CASE(run_writes_one_row_per_step_with_the_metrics) {
  const std::string dir = test::temp_dir("grpo-rows");
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "--echo-deck", &out), 0);
  const std::string h5 = dir + "/out/t.h5";
  BOOST_TEST((steps(h5) == std::vector<int64_t>{1, 2, 3, 4}));
  for (const char* m : {"time/generation", "time/reward", "time/logprob", "time/training", "time/refit", "time/total",
                        "reward/mean", "accuracy", "advantages/mean", "loss", "entropy", "clip_fraction", "ratio/mean",
                        "token_mult_prob_error", "grad_norm", "lr", "prompt_tokens", "generated_tokens/mean",
                        "generated_tokens/max", "truncation_rate", "tokens_per_s/generation", "packing_efficiency",
                        "memory/peak_training"}) {
    const auto v = metric(h5, m);
    BOOST_TEST_INFO(m);
    BOOST_REQUIRE_EQUAL(v.size(), 4u);
    for (double x : v) BOOST_TEST(std::isfinite(x));
  }
  // On-policy (one optimizer step): the ratio is exactly 1, nothing is clipped; lr is the deck's constant.
  for (double r : metric(h5, "ratio/max")) BOOST_TEST(r == 1.0);
  for (double c : metric(h5, "clip_fraction")) BOOST_TEST(c == 0.0);
  for (double lr : metric(h5, "lr")) BOOST_TEST(lr == 3e-3, boost::test_tools::tolerance(1e-6));
  // The stdout: the run's header, the resolved deck (--echo-deck), the step header, a line per step; a checkpoint
  // at exit. The resolved deck is also next to the output file and in it.
  BOOST_TEST(out.find("run 't'\n  model   random init, ") != std::string::npos);
  BOOST_TEST(out.find("  layout  1 rank: dp 1 x tp 1 x pp 1, run.device = cpu\n") != std::string::npos);
  BOOST_TEST(out.find("  output  " + dir + "/out/t.h5, checkpoints in " + dir + "/ck, resolved deck in " + dir +
                      "/out/t.deck.toml\n") != std::string::npos);
  BOOST_TEST(out.find("[grpo]") > out.find("  output  "));
  const std::string deck_copy = read_text(dir + "/out/t.deck.toml");
  BOOST_TEST(deck_copy.find("[grpo]") != std::string::npos);
  BOOST_TEST(deck_copy.find("max_steps = 4") != std::string::npos);
  {
    test_h5::File f(h5);
    BOOST_TEST(deck_copy.find(test_h5::string_attr(f.id, "/", "deck")) != std::string::npos);
  }
  BOOST_TEST(out.find("gen_s") != std::string::npos);
  BOOST_TEST(out.find("\n       4 ") != std::string::npos);
  BOOST_TEST(fs::exists(dir + "/ck/step_00000004/model.safetensors"));
  BOOST_TEST(hone::verify_checkpoint(dir + "/ck/step_00000004", true) == "");
  // Samples at steps 2 and 4, two each.
  test_h5::File f(h5);
  BOOST_REQUIRE(f.id >= 0);
  BOOST_TEST(test_h5::int64s(f.id, "/samples/step") == (std::vector<int64_t>{2, 2, 4, 4}));
}

BOOST_AUTO_TEST_CASE(generation_and_training_logprobs_agree) {
  // token_mult_prob_error = mean exp(|training logprob - generation logprob|) over generated tokens; the logprob
  // phase is forced on so the previous-policy logprobs come from a separate packed forward.
  const std::string dir = test::temp_dir("grpo-mult");
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "loss.skip_prev_logprobs_on_policy=false generation.temperature=0.7",
                               &out), 0);
  BOOST_TEST(out.find("[grpo]") == std::string::npos);  // the resolved deck is printed only with --echo-deck
  const auto e = metric(dir + "/out/t.h5", "token_mult_prob_error");
  BOOST_REQUIRE_EQUAL(e.size(), 4u);
  for (double x : e) {
    BOOST_TEST(x >= 1.0);
    BOOST_TEST(x < 1.0001);
  }
  // Still on-policy: the old logprobs of the logprob phase equal the training forward's (ratio 1 up to rounding).
  for (double r : metric(dir + "/out/t.h5", "ratio/max")) BOOST_TEST(std::abs(r - 1.0) < 1e-5);
}

BOOST_AUTO_TEST_CASE(several_optimizer_steps_and_kl_reference) {
  const std::string dir = test::temp_dir("grpo-multi");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "train.global_batch_size=4 loss.kl_coef=0.1 train.learning_rate=1e-2"), 0);
  const std::string h5 = dir + "/out/t.h5";
  for (double k : metric(h5, "optimizer_steps")) BOOST_TEST(k == 4.0);
  // Four updates per step: later mini-batches are off-policy (ratio moves away from 1), the KL is measured.
  double spread = 0;
  for (size_t i = 0; i < 4; ++i) spread += metric(h5, "ratio/max")[i] - metric(h5, "ratio/min")[i];
  BOOST_TEST(spread > 0.0);
  const auto kl = metric(h5, "kl");
  BOOST_REQUIRE_EQUAL(kl.size(), 4u);
  BOOST_TEST(kl[0] >= 0.0);
  BOOST_TEST(kl[3] > 0.0);  // the policy moved away from the reference
}

BOOST_AUTO_TEST_CASE(dynamic_sampling_and_overlong_filtering) {
  const std::string dir = test::temp_dir("grpo-dyn");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "grpo.use_dynamic_sampling=true grpo.dynamic_sampling_max_gen_batches=3 "
                                                "grpo.overlong_filtering=true"), 0);
  const std::string h5 = dir + "/out/t.h5";
  const auto batches = metric(h5, "dynamic_sampling/batches");
  const auto groups = metric(h5, "dynamic_sampling/groups");
  const auto zero = metric(h5, "zero_variance_fraction");
  BOOST_REQUIRE_EQUAL(batches.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    BOOST_TEST(batches[i] >= 1.0);
    BOOST_TEST(batches[i] <= 3.0);
    BOOST_TEST(groups[i] <= 4.0);
    // Fewer than 4 groups kept only when the batch limit was reached.
    if (groups[i] < 4.0) BOOST_TEST(batches[i] == 3.0);
    // Every kept group has signal: its rewards are not all equal, so the advantages are not all zero.
    if (groups[i] > 0) BOOST_TEST(metric(h5, "advantages/max")[i] > 0.0);
  }
  // A random model almost never answers: most groups carry no signal.
  BOOST_TEST(zero[0] > 0.5);

  // One-character answers (about 1 in 100 right): with 16 samples per group some groups have signal; only those
  // are trained on, 16 samples each.
  const std::string dir2 = test::temp_dir("grpo-dyn2");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir2), "grpo.use_dynamic_sampling=true grpo.dynamic_sampling_max_gen_batches=8 "
                                                 "grpo.num_generations_per_prompt=16 data.max_length=1 "
                                                 "generation.max_new_tokens=1"), 0);
  const std::string h2 = dir2 + "/out/t.h5";
  const auto g2 = metric(h2, "dynamic_sampling/groups"), n2 = metric(h2, "samples"), b2 = metric(h2, "dynamic_sampling/batches");
  BOOST_REQUIRE_EQUAL(g2.size(), 4u);
  double kept = 0;
  for (size_t i = 0; i < 4; ++i) {
    kept += g2[i];
    BOOST_TEST(n2[i] == 16 * g2[i]);
    if (g2[i] < 4.0) BOOST_TEST(b2[i] == 8.0);
    if (g2[i] > 0) {
      BOOST_TEST(metric(h2, "reward/max")[i] == 1.0);
      BOOST_TEST(metric(h2, "optimizer_steps")[i] == 1.0);
    }
  }
  BOOST_TEST(kept > 0.0);
}

BOOST_AUTO_TEST_CASE(overlong_filtering_masks_truncated_samples) {
  // max_new_tokens = 1 and no stop token drawn: (nearly) every sample is truncated. Filtered, those carry no
  // gradient; a step whose samples are all truncated takes no optimizer step.
  const std::string dir = test::temp_dir("grpo-overlong");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "grpo.overlong_filtering=true generation.max_new_tokens=1 "
                                                "generation.stop_token_ids=[]"), 0);
  const std::string h5 = dir + "/out/t.h5";
  const auto trunc = metric(h5, "truncation_rate"), steps_taken = metric(h5, "optimizer_steps");
  BOOST_REQUIRE_EQUAL(trunc.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    if (trunc[i] == 1.0) BOOST_TEST(steps_taken[i] == 0.0);
    if (trunc[i] < 1.0) BOOST_TEST(steps_taken[i] == 1.0);
  }
  // Without filtering, the same truncated samples are trained on: one optimizer step every step.
  const std::string dir2 = test::temp_dir("grpo-overlong-off");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir2), "generation.max_new_tokens=1"), 0);
  for (double k : metric(dir2 + "/out/t.h5", "optimizer_steps")) BOOST_TEST(k == 1.0);
}

BOOST_AUTO_TEST_CASE(too_long_prompts_are_skipped_and_counted) {
  // "rev:123=" is 8 tokens: with 4 new tokens it does not fit in 10; "rev:1=" does.
  const std::string dir = test::temp_dir("grpo-toolong");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(dir), "generation.max_total_sequence_length=10"), 0);
  const std::string h5 = dir + "/out/t.h5";
  double skipped = 0, samples = 0;
  for (double x : metric(h5, "prompts_too_long")) skipped += x;
  for (double x : metric(h5, "samples")) samples += x;
  BOOST_TEST(skipped > 0.0);
  BOOST_TEST(samples + 4 * skipped == 4.0 * 16);  // every prompt either ran its 4 samples or was counted
}

// The qwen3-math setup on a tiny random model: JSONL prompts, the real Qwen3 tokenizer, ChatML with a system
// prompt, the math reward.
BOOST_AUTO_TEST_CASE(jsonl_chatml_math_reward, *boost::unit_test::precondition(test::needs_shared)) {
  const std::string dir = test::temp_dir("grpo-math");
  const std::string deck =
      "[run]\nname = \"t\"\nseed = 3\nmax_steps = 2\n"
      "[model]\nhidden_size = 16\nintermediate_size = 32\nnum_layers = 1\nnum_attention_heads = 2\n"
      "tie_word_embeddings = true\n"
      "[tokenizer]\nkind = \"hf\"\npath = \"" + test::shared_dir() + "/data/tokenizers/qwen3\"\n"
      "chat_format = \"chatml\"\nsystem_prompt = \"Put your final answer within \\\\boxed{}.\"\n"
      "[data]\ntask = \"jsonl\"\npath = \"" + test::source_dir() + "/tests/data/rl/math_sample.jsonl\"\n"
      "[grpo]\nnum_prompts_per_step = 2\nnum_generations_per_prompt = 2\n"
      "[generation]\nmax_new_tokens = 4\nmax_total_sequence_length = 96\n"
      "[train]\nlearning_rate = 1e-3\nmax_tokens_per_microbatch = 192\n"
      "[checkpoint]\ndir = \"" + dir + "/ck\"\n"
      "[output]\ndir = \"" + dir + "/out\"\nsample_every = 1\nnum_samples = 1\n";
  std::string out;
  const int rc = hone_run(write_deck(dir, deck), "", &out);
  BOOST_TEST_INFO(out.substr(out.size() > 1500 ? out.size() - 1500 : 0));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(out.find("reward: math") != std::string::npos);
  const std::string h5 = dir + "/out/t.h5";
  BOOST_TEST(steps(h5) == (std::vector<int64_t>{1, 2}));
  for (double r : metric(h5, "reward/mean")) BOOST_TEST((r >= 0.0 && r <= 1.0));
  for (double t : metric(h5, "prompt_tokens")) BOOST_TEST(t > 20.0);  // system + user turn in ChatML
  test_h5::File f(h5);
  BOOST_REQUIRE(f.id >= 0);
  hid_t d = H5Dopen2(f.id, "/samples/prompt", H5P_DEFAULT);
  BOOST_REQUIRE(d >= 0);
  hid_t t = H5Dget_type(d);
  std::vector<char*> p(test_h5::length(f.id, "/samples/prompt"));
  hid_t mt = H5Tcopy(H5T_C_S1);
  H5Tset_size(mt, H5T_VARIABLE);
  H5Tset_cset(mt, H5T_CSET_UTF8);
  H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, p.data());
  BOOST_REQUIRE(!p.empty());
  const std::string first = p[0];
  BOOST_TEST(first.find("<|im_start|>system\nPut your final answer within \\boxed{}.<|im_end|>") != std::string::npos);
  BOOST_TEST(first.find("<|im_start|>assistant\n") != std::string::npos);
  hid_t space = H5Dget_space(d);
  H5Dvlen_reclaim(mt, space, H5P_DEFAULT, p.data());
  H5Sclose(space);
  H5Tclose(mt);
  H5Tclose(t);
  H5Dclose(d);
}

BOOST_AUTO_TEST_SUITE_END()
