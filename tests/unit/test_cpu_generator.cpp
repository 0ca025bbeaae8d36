// The CPU generation engine against a plain full forward: cached prefill + decode logits equal the full forward's
// at every position; generation logprobs equal the training-side recomputation (token_mult_prob_error ~ 1);
// greedy follows the full forward's argmax; sampling is reproducible and independent of batch composition, order
// and wave size. Tiny random models: qwen3-like (qk_norm, tied and untied), qwen2-like (biases), llama-like.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/finite_diff.h"
#include "generation/cached_forward.h"
#include "generation/cpu_generator.h"
#include "unit/test_cpu_generator_util.h"

using namespace hone;
using test::TinyKind;

BOOST_AUTO_TEST_SUITE(cpu_generator)

namespace {

const TinyKind kAllKinds[] = {TinyKind::qwen3_tied, TinyKind::qwen3_untied, TinyKind::qwen2_untied,
                              TinyKind::llama_mha};

std::vector<int32_t> random_tokens(int n, int V, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int32_t> t(test::len(n));
  for (int32_t& x : t) x = int32_t(g() % uint64_t(V - 2)) + 2;  // 0 and 1 stay free for special uses
  return t;
}

StopCriteria no_stop(int64_t max_new) {
  StopCriteria s;
  s.max_new_tokens = max_new;
  return s;
}

SamplingParams sampling(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_CASE(prefill_and_decode_logits_equal_full_forward) {
  for (TinyKind kind : kAllKinds) {
    const test::TinyModel m = test::tiny_model(kind, 100 + int(kind));
    const int V = m.config.vocab_size;
    // Two sequences packed in one prefill (slots 2 and 0 of 3), then decoded together token by token.
    const std::vector<int32_t> a = random_tokens(12, V, 1), b = random_tokens(9, V, 2);
    const int pa = 5, pb = 3;  // prompt lengths
    CachedForward f(m.config);
    KvCache cache;
    cache.reshape(m.config.num_hidden_layers, 3, 13, m.config.num_key_value_heads, m.config.head_dim);
    const std::vector<float> ra = test::full_forward_logits(m, a), rb = test::full_forward_logits(m, b);
    std::vector<int32_t> packed(a.begin(), a.begin() + pa);
    packed.insert(packed.end(), b.begin(), b.begin() + pb);
    const std::vector<int32_t> cu = {0, pa, pa + pb}, slots = {2, 0};
    std::vector<float> logits = test::nan_floats(test::len(2 * V));
    f.prefill(m.weights, cache, packed.data(), cu.data(), slots.data(), 2, logits.data());
    double worst = 0;
    auto compare = [&](const float* got, const std::vector<float>& ref, int pos) {
      for (int v = 0; v < V; ++v)
        worst = std::max(worst, double(std::fabs(got[v] - ref[test::len(int64_t(pos) * V + v)])));
    };
    compare(logits.data(), ra, pa - 1);
    compare(logits.data() + V, rb, pb - 1);
    for (int step = 0;; ++step) {
      std::vector<int32_t> tok, pos, sl;
      if (pa + step < int(a.size())) tok.push_back(a[test::len(pa + step)]), pos.push_back(pa + step), sl.push_back(2);
      if (pb + step < int(b.size())) tok.push_back(b[test::len(pb + step)]), pos.push_back(pb + step), sl.push_back(0);
      if (tok.empty()) break;
      std::fill(logits.begin(), logits.end(), std::nanf(""));
      f.decode(m.weights, cache, tok.data(), pos.data(), sl.data(), int(tok.size()), logits.data());
      for (size_t r = 0; r < tok.size(); ++r) compare(logits.data() + r * size_t(V), sl[r] == 2 ? ra : rb, pos[r]);
    }
    BOOST_TEST_INFO("model kind " << int(kind));
    BOOST_TEST(worst <= 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(generation_logprobs_equal_training_logprobs) {
  for (TinyKind kind : kAllKinds) {
    const test::TinyModel m = test::tiny_model(kind, 200 + int(kind));
    CpuGenerator gen(m.config, m.weights);
    std::vector<GenerationRequest> req;
    for (int i = 0; i < 6; ++i) req.push_back({random_tokens(3 + i, m.config.vocab_size, 10 + i), i});
    SamplingParams p = sampling(0.7f);
    p.top_p = 0.9f;  // filters change what can be drawn, never the recorded full-vocabulary logprob
    const auto out = gen.generate(req, p, no_stop(10), 42, 3, 64);
    double worst = 0, mult_err = 0;
    int64_t n = 0;
    for (const Rollout& r : out) {
      BOOST_REQUIRE_EQUAL(r.completion.size(), 10u);
      BOOST_REQUIRE_EQUAL(r.logprobs.size(), r.completion.size());
      const auto ref = test::full_forward_logprobs(m, r.prompt, r.completion, p.temperature);
      for (size_t i = 0; i < ref.size(); ++i) {
        const double d = std::fabs(double(r.logprobs[i]) - ref[i]);
        worst = std::max(worst, d);
        mult_err += std::exp(d);
        ++n;
      }
    }
    mult_err /= double(n);
    BOOST_TEST_INFO("model kind " << int(kind));
    BOOST_TEST(worst <= 1e-5);
    BOOST_TEST(mult_err < 1.0001);
  }
}

BOOST_AUTO_TEST_CASE(greedy_follows_the_full_forward_argmax_and_repeats) {
  for (TinyKind kind : {TinyKind::qwen3_untied, TinyKind::qwen2_untied}) {
    const test::TinyModel m = test::tiny_model(kind, 300 + int(kind));
    CpuGenerator gen(m.config, m.weights);
    SamplingParams p;
    p.greedy = true;
    const std::vector<GenerationRequest> req = {{random_tokens(4, m.config.vocab_size, 7), 0},
                                                {random_tokens(6, m.config.vocab_size, 8), 1}};
    const auto a = gen.generate(req, p, no_stop(8), 1, 0, 64);
    const auto b = gen.generate(req, p, no_stop(8), 999, 5, 64);  // greedy ignores seed and step
    for (size_t s = 0; s < req.size(); ++s) {
      BOOST_TEST(a[s].completion == b[s].completion);
      std::vector<int32_t> seq = req[s].prompt;
      seq.insert(seq.end(), a[s].completion.begin(), a[s].completion.end());
      const auto logits = test::full_forward_logits(m, seq);
      const int V = m.config.vocab_size;
      for (size_t i = 0; i < a[s].completion.size(); ++i) {
        const float* row = logits.data() + (req[s].prompt.size() - 1 + i) * size_t(V);
        BOOST_TEST(a[s].completion[i] == int32_t(std::max_element(row, row + V) - row));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sample_is_independent_of_batch_order_and_wave_size) {
  const test::TinyModel m = test::tiny_model(TinyKind::qwen3_tied, 400);
  const int V = m.config.vocab_size;
  const GenerationRequest target = {random_tokens(7, V, 77), 1234};
  const SamplingParams p = sampling(1.0f);
  const StopCriteria stop = no_stop(12);
  CpuGenerator alone_gen(m.config, m.weights);
  const Rollout alone = alone_gen.generate({target}, p, stop, 5, 2, 64)[0];

  // 17 others of various lengths, the target somewhere in the middle, then shuffled, with several wave sizes.
  std::vector<GenerationRequest> batch;
  for (int i = 0; i < 17; ++i) batch.push_back({random_tokens(2 + (i * 5) % 11, V, 500 + i), i});
  batch.insert(batch.begin() + 9, target);
  std::mt19937_64 g(3);
  for (int max_batch : {256, 1, 4, 7}) {
    std::shuffle(batch.begin(), batch.end(), g);
    CpuGenerator gen(m.config, m.weights, GenerationOptions{max_batch});
    const auto out = gen.generate(batch, p, stop, 5, 2, 64);
    BOOST_REQUIRE_EQUAL(out.size(), batch.size());
    int found = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      BOOST_TEST(out[i].prompt == batch[i].prompt);
      BOOST_TEST(out[i].sample_index == batch[i].sample_index);
      if (batch[i].sample_index != target.sample_index) continue;
      ++found;
      BOOST_TEST_INFO("max_batch " << max_batch);
      BOOST_TEST(out[i].completion == alone.completion);
      // Within a few ulps: BLAS may sum a row in another order when the batch has another number of rows.
      for (size_t t = 0; t < alone.logprobs.size(); ++t)
        BOOST_TEST(std::fabs(out[i].logprobs[t] - alone.logprobs[t]) <= 1e-6 * (1 + std::fabs(alone.logprobs[t])));
    }
    BOOST_TEST(found == 1);
    BOOST_TEST(gen.stats().waves == (int64_t(batch.size()) + max_batch - 1) / max_batch);
  }
}

BOOST_AUTO_TEST_CASE(sampling_is_keyed_by_seed_step_and_sample_index) {
  const test::TinyModel m = test::tiny_model(TinyKind::qwen2_untied, 500);
  CpuGenerator gen(m.config, m.weights);
  const std::vector<int32_t> prompt = random_tokens(5, m.config.vocab_size, 9);
  const SamplingParams p = sampling(1.5f);  // flat enough that 16 tokens almost surely differ somewhere
  auto run = [&](uint64_t seed, uint32_t step, int64_t sample) {
    return gen.generate({{prompt, sample}}, p, no_stop(16), seed, step, 64)[0].completion;
  };
  const auto base = run(1, 0, 0);
  BOOST_TEST(run(1, 0, 0) == base);
  BOOST_TEST(run(2, 0, 0) != base);
  BOOST_TEST(run(1, 1, 0) != base);
  BOOST_TEST(run(1, 0, 1) != base);
}

BOOST_AUTO_TEST_CASE(an_in_place_refit_is_seen_by_the_next_call) {
  test::TinyModel m = test::tiny_model(TinyKind::qwen3_untied, 600);
  CpuGenerator gen(m.config, m.weights);
  const std::vector<GenerationRequest> req = {{random_tokens(5, m.config.vocab_size, 4), 0}};
  const SamplingParams p = sampling(1.0f);
  const auto before = gen.generate(req, p, no_stop(6), 1, 0, 64)[0];
  float* lm = m.weights.lm_head.f32();
  for (int64_t i = 0; i < m.weights.lm_head.numel(); ++i) lm[i] *= 3.0f;  // what a refit does: same memory
  const auto after = gen.generate(req, p, no_stop(6), 1, 0, 64)[0];
  const auto ref = test::full_forward_logprobs(m, after.prompt, after.completion, 1.0f);
  for (size_t i = 0; i < ref.size(); ++i) BOOST_TEST(std::fabs(after.logprobs[i] - ref[i]) <= 1e-5);
  BOOST_TEST(after.logprobs[0] != before.logprobs[0]);
}

BOOST_AUTO_TEST_SUITE_END()
