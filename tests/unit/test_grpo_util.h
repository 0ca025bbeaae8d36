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

// The metrics of training that several ranks reproduce within rounding (the reduction order differs).
inline const std::vector<std::string>& training_metrics() {
  static const std::vector<std::string> m = {"loss", "grad_norm", "entropy", "token_mult_prob_error"};
  return m;
}

}  // namespace test_grpo
