// The generation engine's stop rules (on the CPU backend) (stop token, stop string, max_new_tokens, a request's own max_new_tokens,
// max_total_sequence_length), GRPO groups sharing one prompt prefill, its statistics, and the errors it reports for
// bad requests.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include "common/finite_diff.h"
#include "data/response_length.h"
#include "generation/generator.h"
#include "runtime/error.h"
#include "unit/test_generator_util.h"

using namespace hone;
using test::TinyKind;

BOOST_AUTO_TEST_SUITE(generator_stops)

namespace {

std::vector<int32_t> random_tokens(int n, int V, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int32_t> t(test::len(n));
  for (int32_t& x : t) x = int32_t(g() % uint64_t(V));
  return t;
}

// One letter per token: enough of a tokenizer for stop strings.
std::string letters(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t t : ids) s += char('a' + t % 26);
  return s;
}

std::string reason(const Rollout& r) { return finish_reason_name(r.finish_reason); }

StopCriteria max_new(int64_t n) {
  StopCriteria s;
  s.max_new_tokens = n;
  return s;
}

struct Fixture {
  test::TinyModel m = test::tiny_model(TinyKind::qwen3_untied, 700);
  SamplingParams p;  // temperature 1
  std::vector<GenerationRequest> requests() const {
    std::vector<GenerationRequest> r;
    for (int i = 0; i < 5; ++i) r.push_back({random_tokens(3 + i, m.config.vocab_size, 40 + i), 100 + i});
    return r;
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(max_new_tokens_gives_length, Fixture) {
  auto gen = make_cpu_generator(m.config, m.weights);
  const auto out = gen->generate(requests(), p, max_new(9), 1, 0, 64, letters);
  for (const Rollout& r : out) {
    BOOST_TEST(r.completion.size() == 9u);
    BOOST_TEST(reason(r) == "length");
    BOOST_TEST(r.text == letters(r.completion));
  }
}

BOOST_FIXTURE_TEST_CASE(a_stop_token_ends_the_completion_and_is_kept, Fixture) {
  auto gen = make_cpu_generator(m.config, m.weights);
  const auto free_run = gen->generate(requests(), p, max_new(12), 1, 0, 64);
  StopCriteria stop = max_new(12);
  const int32_t eos = free_run[0].completion[3];
  stop.stop_token_ids = {eos};
  const auto out = gen->generate(requests(), p, stop, 1, 0, 64);
  for (size_t s = 0; s < out.size(); ++s) {
    const auto& full = free_run[s].completion;
    const auto first = std::find(full.begin(), full.end(), eos);
    if (first == full.end()) {
      BOOST_TEST(out[s].completion == full);
      BOOST_TEST(reason(out[s]) == "length");
    } else {
      BOOST_TEST(out[s].completion == std::vector<int32_t>(full.begin(), first + 1));
      BOOST_TEST(reason(out[s]) == "stop");
      BOOST_TEST(out[s].logprobs.size() == out[s].completion.size());
    }
  }
  BOOST_TEST(out[0].completion.size() <= 4u);
}

// The benchmark's drawn lengths (data.response_length) reach the generator as each request's own max_new_tokens:
// every completion has exactly its drawn length, ends with reason length, and is the prefix of the free run.
BOOST_FIXTURE_TEST_CASE(each_request_stops_at_its_own_drawn_length, Fixture) {
  data::ResponseLengthOptions o;
  o.rule = "lognormal";
  o.mean = 8;
  o.cap = 24;
  o.seed = 11;
  const data::ResponseLengths lengths(o);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(random_tokens(3 + i, m.config.vocab_size, 60 + i));
  const int G = 4;
  std::vector<GenerationRequest> reqs = group_requests(prompts, G);
  std::vector<int64_t> drawn;
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].max_new_tokens = lengths.draw(int64_t(i) / G, int64_t(i) % G);
    drawn.push_back(reqs[i].max_new_tokens);
  }
  BOOST_TEST(*std::max_element(drawn.begin(), drawn.end()) > *std::min_element(drawn.begin(), drawn.end()));
  const auto free_run = make_cpu_generator(m.config, m.weights)->generate(group_requests(prompts, G), p, max_new(24), 1, 0, 64);
  for (int max_seqs : {256, 3}) {  // every sequence at once, and three at a time (groups split)
    GenerationOptions o;
    o.max_num_seqs = max_seqs;
    auto gen = make_cpu_generator(m.config, m.weights, o);
    const auto out = gen->generate(reqs, p, max_new(24), 1, 0, 64);
    int64_t total = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      BOOST_TEST(int64_t(out[i].completion.size()) == drawn[i], "request " << i);
      BOOST_TEST(reason(out[i]) == "length");
      BOOST_TEST(out[i].completion == std::vector<int32_t>(free_run[i].completion.begin(),
                                                           free_run[i].completion.begin() + drawn[i]));
      total += drawn[i];
    }
    BOOST_TEST(gen->stats().generated_tokens == total);
  }
  // A request's own limit above the call's is refused, naming the request.
  reqs[2].max_new_tokens = 25;
  BOOST_CHECK_THROW(make_cpu_generator(m.config, m.weights)->generate(reqs, p, max_new(24), 1, 0, 64), hone::UserError);
}

BOOST_FIXTURE_TEST_CASE(a_stop_string_cuts_the_text_not_the_tokens, Fixture) {
  auto gen = make_cpu_generator(m.config, m.weights);
  const auto free_run = gen->generate(requests(), p, max_new(12), 1, 0, 64, letters);
  const std::string stop_string = free_run[1].text.substr(4, 2);
  StopCriteria stop = max_new(12);
  stop.stop_strings = {stop_string};
  const auto out = gen->generate(requests(), p, stop, 1, 0, 64, letters);
  for (size_t s = 0; s < out.size(); ++s) {
    const std::string full = free_run[s].text;
    const size_t at = full.find(stop_string);
    if (at == std::string::npos) {
      BOOST_TEST(out[s].text == full);
      BOOST_TEST(reason(out[s]) == "length");
    } else {
      // One letter per token: the string ends with token at + 1, which is the last one kept.
      BOOST_TEST(out[s].completion.size() == at + 2);
      BOOST_TEST(out[s].text == full.substr(0, at));
      BOOST_TEST(reason(out[s]) == "stop");
    }
  }
  BOOST_TEST(reason(out[1]) == "stop");
}

BOOST_FIXTURE_TEST_CASE(max_total_sequence_length_caps_prompt_plus_completion, Fixture) {
  auto gen = make_cpu_generator(m.config, m.weights);
  const auto reqs = requests();  // prompts of 3..7 tokens
  const auto out = gen->generate(reqs, p, max_new(16), 1, 0, 9);
  const auto free_run = gen->generate(reqs, p, max_new(16), 1, 0, 64);
  for (size_t s = 0; s < out.size(); ++s) {
    BOOST_TEST(out[s].prompt.size() + out[s].completion.size() == 9u);
    BOOST_TEST(reason(out[s]) == "length");
    BOOST_TEST(out[s].completion ==
               std::vector<int32_t>(free_run[s].completion.begin(),
                                    free_run[s].completion.begin() + int64_t(out[s].completion.size())));
  }
  // A prompt as long as the limit leaves no room: refused, naming the request.
  BOOST_CHECK_THROW(gen->generate({{random_tokens(9, m.config.vocab_size, 1), 0}}, p, max_new(4), 1, 0, 9),
                    hone::UserError);
}

BOOST_FIXTURE_TEST_CASE(group_samples_share_the_prompt_prefill, Fixture) {
  const std::vector<int32_t> a = random_tokens(8, m.config.vocab_size, 5), b = random_tokens(6, m.config.vocab_size, 6);
  // Two groups, each's requests consecutive (as group_requests gives them): a x 4 (samples 10..13) and b x 3
  // (samples 20..22).
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back({a, 10 + i});
  for (int i = 0; i < 3; ++i) reqs.push_back({b, 20 + i});
  auto gen = make_cpu_generator(m.config, m.weights);
  const auto out = gen->generate(reqs, p, max_new(10), 3, 1, 64);
  BOOST_TEST(gen->stats().prefill_tokens == int64_t(a.size() + b.size()));
  BOOST_TEST(gen->stats().sequences == 7);
  int64_t generated = 0;
  for (const Rollout& r : out) generated += int64_t(r.completion.size());
  BOOST_TEST(gen->stats().generated_tokens == generated);
  bool differ = false;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Rollout r = make_cpu_generator(m.config, m.weights)->generate({reqs[i]}, p, max_new(10), 3, 1, 64)[0];
    BOOST_TEST(out[i].completion == r.completion);
    // Within a few ulps: BLAS may sum a row in another order when the batch has another number of rows.
    for (size_t t = 0; t < r.logprobs.size(); ++t)
      BOOST_TEST(std::fabs(out[i].logprobs[t] - r.logprobs[t]) <= 1e-6 * (1 + std::fabs(r.logprobs[t])));
    if (i > 0 && out[i].prompt == out[0].prompt && out[i].completion != out[0].completion) differ = true;
  }
  BOOST_TEST(differ);  // samples of one group are different draws
}

BOOST_FIXTURE_TEST_CASE(group_requests_number_samples_globally, Fixture) {
  const std::vector<std::vector<int32_t>> prompts = {{3, 4}, {5}, {6, 7, 8}};
  const auto reqs = group_requests(prompts, 4, 100);
  BOOST_REQUIRE_EQUAL(reqs.size(), 12u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    BOOST_TEST(reqs[i].prompt == prompts[i / 4]);
    BOOST_TEST(reqs[i].sample_index == int64_t(100 + i));
  }
  // Groups split by a limit of three sequences at once give what one pass over all of them gives; a group's prompt is
  // prefilled once when its samples start together, again for the samples that start later.
  GenerationOptions three;
  three.max_num_seqs = 3;
  auto one = make_cpu_generator(m.config, m.weights), split = make_cpu_generator(m.config, m.weights, three);
  const auto a = one->generate(reqs, p, max_new(5), 2, 0, 64), b = split->generate(reqs, p, max_new(5), 2, 0, 64);
  for (size_t i = 0; i < reqs.size(); ++i) BOOST_TEST(a[i].completion == b[i].completion);
  BOOST_TEST(one->stats().prefill_tokens == 6);
  BOOST_TEST(split->stats().prefill_tokens > 6);
  BOOST_TEST(split->stats().prefill_tokens <= 2 * 4 + 1 * 4 + 3 * 4);
  BOOST_CHECK_THROW(group_requests(prompts, 0), hone::UserError);
}

BOOST_FIXTURE_TEST_CASE(the_kv_cache_holds_what_runs_at_once, Fixture) {
  GenerationOptions o;
  o.max_num_seqs = 2;
  auto gen = make_cpu_generator(m.config, m.weights, o);
  const auto reqs = requests();  // 5 requests of distinct prompts, up to 7 tokens
  gen->generate(reqs, p, max_new(4), 1, 0, 64);
  // Two sequences at once, each at most 7 + 4 tokens: one block of 16 tokens each (K and V, every layer, fp32).
  const int64_t block_bytes = 2 * int64_t(m.config.num_hidden_layers) * m.config.num_key_value_heads * 16 *
                              m.config.head_dim * 4;
  BOOST_TEST(gen->stats().kv_capacity_tokens == 2 * 16);
  BOOST_TEST(gen->stats().peak_kv_bytes == 2 * block_bytes);
  BOOST_TEST(gen->stats().preemptions == 0);
  BOOST_TEST(gen->stats().generated_tokens == 5 * 4);
  // 4 tokens a sequence: one from its prefill, three from decode steps shared by the two that run together.
  BOOST_TEST(gen->stats().decode_steps >= 3 * 3);
  BOOST_TEST(gen->stats().decode_steps <= 5 * 3);
  // A later call with longer sequences sizes the cache again (nothing is preempted).
  gen->generate(reqs, p, max_new(20), 1, 0, 64);
  BOOST_TEST(gen->stats().kv_capacity_tokens == 2 * 2 * 16);
  BOOST_TEST(gen->stats().preemptions == 0);
}

BOOST_FIXTURE_TEST_CASE(bad_requests_are_user_errors, Fixture) {
  auto gen = make_cpu_generator(m.config, m.weights);
  BOOST_CHECK_THROW(gen->generate({{{}, 0}}, p, max_new(4), 1, 0, 64), hone::UserError);
  BOOST_CHECK_THROW(gen->generate({{{1, m.config.vocab_size}, 0}}, p, max_new(4), 1, 0, 64), hone::UserError);
  BOOST_CHECK_THROW(gen->generate({{{1, 2}, -1}}, p, max_new(4), 1, 0, 64), hone::UserError);
  BOOST_CHECK_THROW(gen->generate({{{1, 2}, 0}}, p, max_new(0), 1, 0, 64), hone::UserError);
  StopCriteria s = max_new(4);
  s.stop_strings = {"x"};
  BOOST_CHECK_THROW(gen->generate({{{1, 2}, 0}}, p, s, 1, 0, 64), hone::UserError);  // no decoder
  BOOST_TEST(gen->generate({}, p, max_new(4), 1, 0, 64).empty());
}

BOOST_AUTO_TEST_SUITE_END()
