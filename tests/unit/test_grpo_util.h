// Helpers of the GRPO loop tests: a tiny deck in a temporary folder, `hone run` on it, the output file read back.
#pragma once

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/paths.h"
#include "model/safetensors.h"
#include "test_step_output_util.h"

namespace test_grpo {

// A random-init model of a few thousand parameters on the reverse task: a run of a few steps takes well under a
// second. Several micro-batches per step (max_tokens_per_microbatch 48) exercise the global loss denominators.
inline std::string tiny_deck(const std::string& dir) {
  return "[run]\nname = \"t\"\nseed = 7\nmax_steps = 4\n"
         "[model]\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\nnum_attention_heads = 2\n"
         "tie_word_embeddings = true\n"
         "[tokenizer]\nkind = \"chars\"\n"
         "[data]\ntask = \"reverse\"\nmin_length = 1\nmax_length = 3\nalphabet = \"digits\"\n"
         "[grpo]\nnum_prompts_per_step = 4\nnum_generations_per_prompt = 4\n"
         "[generation]\nmax_new_tokens = 4\nmax_total_sequence_length = 16\n"
         "[train]\nlearning_rate = 3e-3\nmax_tokens_per_microbatch = 48\n"
         "[checkpoint]\ndir = \"" + dir + "/ck\"\n"
         "[output]\ndir = \"" + dir + "/out\"\nsample_every = 2\nnum_samples = 2\n";
}

// Overrides of the tiny deck for the parallel equivalence tests, so that what they compare includes the
// policy-gradient term of the loss:
//   * rewards that differ within a group (non-zero advantages). The exact-match reward of the reverse task is out of
//     reach of a model that samples nearly uniformly from the 101 ids of the character vocabulary; with partial
//     credit (data.partial_credit) a completion earns a share for the answer's characters it holds in order. A
//     completion of 8 characters shares one with a reversed string of 4 to 6 digits about one time in four, so that
//     in about 99 steps of 100 some group of four has differing rewards (check_advantages_nonzero asserts it). The
//     suites' models are all nearly uniform and draw with the same keys, so they mostly share their completions:
//     with the deck's seed, steps 1 and 3 have such groups in every suite (step 2 has none in some).
//     Prompts are up to 11 tokens ("rev:123456="), sequences up to 19.
//   * train.adam_eps = 1e-4. The policy gradient is about a thousand times the entropy bonus's (grad_norm 0.46 against
//     0.0003 at the first step), and with it the rounding of a gradient summed in another order (over ranks, over
//     tensor-parallel shards). Adam moves a weight by lr * g / (|g| + eps): where a component of the gradient cancels
//     to about eps (1e-8 by default) its rounding, of the same size, changes the update by a good part of lr (3e-3).
//     At eps = 1e-8 a dozen isolated weights of 44544 (tp = 2 x pp = 2 against one rank, 3 steps) ended up 1e-5 to
//     1.4e-4 apart, 99.9 % of them within 5e-6; at eps = 1e-4 all are within 1e-7, and the loss and gradient norm
//     agree as closely (within 1e-6 relative) either way: the 1e-5 bound on the weights keeps measuring rounding,
//     not Adam's division of it.
inline constexpr const char* kPolicyGradientArgs =
    "data.partial_credit=true data.min_length=4 data.max_length=6 generation.max_new_tokens=8 "
    "generation.max_total_sequence_length=24 train.adam_eps=1e-4";

// Writes the tiny deck (or `text`) to <dir>/deck.toml and returns its path.
inline std::string write_deck(const std::string& dir, const std::string& text = "") {
  const std::string path = dir + "/deck.toml";
  std::ofstream(path) << (text.empty() ? tiny_deck(dir) : text);
  return path;
}

// `hone run <deck> <args>` (args: overrides); returns the exit status, output in *out.
inline int hone_run(const std::string& deck, const std::string& args, std::string* out = nullptr,
                    const std::string& prefix = "") {
  return test::run_command(prefix + test::hone_exe() + " run " + deck + " " + args, out);
}

// A metric's values from <dir>/out/t.h5 (empty when the file or the metric is missing).
inline std::vector<double> metric(const std::string& h5, const std::string& name) {
  test_h5::File f(h5);
  if (f.id < 0 || !test_h5::link_exists(f.id, "/steps/" + name)) return {};
  return test_h5::doubles(f.id, "/steps/" + name);
}
inline std::vector<int64_t> steps(const std::string& h5) {
  test_h5::File f(h5);
  if (f.id < 0 || !test_h5::link_exists(f.id, "/steps/step")) return {};
  return test_h5::int64s(f.id, "/steps/step");
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Metrics that must be reproduced exactly by a resumed or re-run job (everything but times and rates).
inline const std::vector<std::string>& deterministic_metrics() {
  static const std::vector<std::string> m = {
      "reward/mean", "reward/std", "reward/min", "reward/max", "accuracy", "advantages/mean", "advantages/min",
      "advantages/max", "loss", "entropy", "clip_fraction", "ratio/min", "ratio/mean", "ratio/max",
      "token_mult_prob_error", "grad_norm", "lr", "prompt_tokens", "generated_tokens/mean", "generated_tokens/max",
      "truncation_rate", "packing_efficiency"};
  return m;
}

// Largest |a - b| over every tensor of two model.safetensors files (which must hold the same tensors).
inline double max_weight_diff(const std::string& a, const std::string& b) {
  hone::SafetensorsFile w1(a), w2(b);
  BOOST_REQUIRE_EQUAL(w1.tensors().size(), w2.tensors().size());
  double max_diff = 0;
  for (const auto& t : w1.tensors()) {
    BOOST_REQUIRE_EQUAL(t.numel(), w2.info(t.name).numel());
    std::vector<float> x(size_t(t.numel())), y(size_t(t.numel()));
    w1.read_f32(t.name, x.data());
    w2.read_f32(t.name, y.data());
    for (size_t i = 0; i < x.size(); ++i) max_diff = std::max(max_diff, double(std::abs(x[i] - y[i])));
  }
  return max_diff;
}

// The metrics of `names` agree within rel * (1 + |value|) over the steps [first, last] (1-based).
inline void check_metrics_close(const std::string& h1, const std::string& h2, const std::vector<std::string>& names,
                                double rel, size_t first, size_t last) {
  for (const auto& m : names) {
    const auto a = metric(h1, m), b = metric(h2, m);
    BOOST_REQUIRE_GE(a.size(), last);
    BOOST_REQUIRE_GE(b.size(), last);
    for (size_t i = first - 1; i < last; ++i)
      BOOST_TEST(std::abs(a[i] - b[i]) <= rel * (1 + std::abs(a[i])), m << " step " << i + 1 << ": " << a[i] << " vs " << b[i]);
  }
}

// The means of the rewards and of the advantages of two runs whose data-parallel ranks add them up in another order
// (partial credit gives fractions such as 1/7): equal to the last bits.
inline void check_reward_means_close(const std::string& h1, const std::string& h2, size_t first, size_t last) {
  check_metrics_close(h1, h2, {"reward/mean", "advantages/mean"}, 1e-12, first, last);
}

// Some step of [first, last] (1-based) of an output file had rewards that differ within a group: a non-zero advantage,
// so that the policy-gradient term of the loss was part of what a test compares.
inline void check_advantages_nonzero(const std::string& h5, size_t first, size_t last) {
  const auto lo = metric(h5, "advantages/min"), hi = metric(h5, "advantages/max");
  const auto rmin = metric(h5, "reward/min"), rmax = metric(h5, "reward/max");
  BOOST_REQUIRE_GE(lo.size(), last);
  BOOST_REQUIRE_GE(hi.size(), last);
  BOOST_REQUIRE_GE(rmin.size(), last);
  BOOST_REQUIRE_GE(rmax.size(), last);
  double largest = 0, spread = 0;
  for (size_t i = first - 1; i < last; ++i) {
    largest = std::max({largest, std::abs(lo[i]), std::abs(hi[i])});
    spread = std::max(spread, rmax[i] - rmin[i]);
  }
  BOOST_TEST_MESSAGE(h5 << " steps " << first << ".." << last << ": largest |advantage| " << largest
                        << ", largest reward spread " << spread);
  BOOST_TEST(largest > 0.0, h5 << ": all advantages of steps " << first << ".." << last
                                << " are zero: the policy-gradient term was not exercised");
  BOOST_TEST(spread > 0.0, h5 << ": every reward of steps " << first << ".." << last << " is the same");
}

// The metrics of training that several ranks reproduce within rounding (the reduction order differs).
inline const std::vector<std::string>& training_metrics() {
  static const std::vector<std::string> m = {"loss", "grad_norm", "entropy", "token_mult_prob_error"};
  return m;
}

}  // namespace test_grpo
