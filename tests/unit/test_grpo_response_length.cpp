// `hone run` with drawn response lengths (data.response_length, the long-tail benchmark's rule) on the CPU engine:
// every sample stops at the length drawn for its (seed, prompt, sample), on one rank and on two, and the step writes
// the generation's tail metrics and prints them under its line.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "data/response_length.h"
#include "test_grpo_util.h"

using namespace test_grpo;

namespace {

const int64_t kPrompts = 4, kG = 4, kSteps = 2;

std::string deck(const std::string& dir) {
  return "[run]\nname = \"t\"\nseed = 7\nmax_steps = 2\n"
         "[model]\nhidden_size = 32\nintermediate_size = 64\nnum_layers = 1\nnum_attention_heads = 2\n"
         "tie_word_embeddings = true\n"
         "[tokenizer]\nkind = \"chars\"\n"
         "[data]\ntask = \"random_tokens\"\nprompt_tokens = 4\nresponse_length = \"lognormal\"\n"
         "response_length_mean = 6.0\n"
         "[grpo]\nnum_prompts_per_step = 4\nnum_generations_per_prompt = 4\n"
         "[generation]\nmax_new_tokens = 16\nmax_total_sequence_length = 24\nignore_eos = true\n"
         "[train]\nlearning_rate = 1e-3\nmax_tokens_per_microbatch = 48\n"
         "[checkpoint]\ndir = \"" + dir + "/ck\"\nsave_at_exit = false\n"
         "[output]\ndir = \"" + dir + "/out\"\nsample_every = 0\n";
}

std::string run_in(const std::string& name, bool two_ranks, std::string* out) {
  const std::string dir = test::temp_dir(name);
  const std::string prefix = two_ranks ? "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root " : "";
  const int rc = hone_run(write_deck(dir, deck(dir)), "", out, prefix);
  BOOST_TEST_INFO(out->substr(out->size() > 1500 ? out->size() - 1500 : 0));
  BOOST_REQUIRE_EQUAL(rc, 0);
  return dir + "/out/t.h5";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_response_length)

BOOST_AUTO_TEST_CASE(every_sample_stops_at_its_drawn_length_on_any_rank_count) {
  hone::data::ResponseLengthOptions o;
  o.rule = "lognormal";
  o.mean = 6;
  o.cap = 16;
  o.seed = 7;
  const hone::data::ResponseLengths lengths(o);
  std::vector<double> mean, max;
  for (int64_t step = 0; step < kSteps; ++step) {
    double sum = 0, longest = 0;
    for (int64_t p = 0; p < kPrompts; ++p)
      for (int64_t g = 0; g < kG; ++g) {
        const double n = double(lengths.draw(step * kPrompts + p, g));  // the prompt's stream index
        sum += n;
        longest = std::max(longest, n);
      }
    mean.push_back(sum / double(kPrompts * kG));
    max.push_back(longest);
  }

  std::string out1, out2;
  const std::string one = run_in("grpo-lengths-1", false, &out1), two = run_in("grpo-lengths-2", true, &out2);
  for (const std::string& h5 : {one, two}) {
    BOOST_TEST(metric(h5, "generated_tokens/mean") == mean, boost::test_tools::per_element());
    BOOST_TEST(metric(h5, "generated_tokens/max") == max, boost::test_tools::per_element());
    BOOST_TEST(metric(h5, "truncation_rate") == std::vector<double>(kSteps, 1.0), boost::test_tools::per_element());
    for (const char* m : {"generation/tokens_per_s", "generation/tail_s", "generation/tail_tokens",
                          "generation/mean_running_seqs", "generation/batch_occupancy"}) {
      BOOST_TEST_INFO(m);
      BOOST_TEST(metric(h5, m).size() == size_t(kSteps));
    }
    for (double occupancy : metric(h5, "generation/batch_occupancy")) BOOST_TEST((occupancy > 0 && occupancy <= 1));
  }
  for (const std::string* out : {&out1, &out2})
    BOOST_TEST(out->find("last 10% of sequences") != std::string::npos, *out);
}

BOOST_AUTO_TEST_SUITE_END()
