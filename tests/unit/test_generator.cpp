// The generation engine (Generator<B>, here on the CPU backend) against a plain full forward: paged prefill +
// decode logits equal the full forward's at every position; generation logprobs equal the training-side
// recomputation (token_mult_prob_error ~ 1); greedy follows the full forward's argmax; sampling is reproducible and
// independent of batch composition, order and how many sequences run at once. Tiny random models: qwen3-like
// (qk_norm, tied and untied), qwen2-like (biases), llama-like.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/finite_diff.h"
#include "backend/backend.h"
#include "generation/generation_forward.h"
#include "generation/generator.h"
#include "model/weights.h"
#include "unit/test_generator_util.h"

using namespace hone;
using test::TinyKind;

BOOST_AUTO_TEST_SUITE(generator)

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
    // Two sequences packed in one prefill (a in blocks 5..8, b in blocks 0..3 of 4 tokens), then decoded together
    // token by token.
    const std::vector<int32_t> a = random_tokens(12, V, 1), b = random_tokens(9, V, 2);
    const int pa = 5, pb = 3;  // prompt lengths
    const int bs = 4, MB = 4;
    GenerationForward<CpuBackend> f(m.config, param_layout_of(m.weights), m.weights.flat.f32(), CpuBackend::Exec{});
    f.allocate_cache(9, bs);
    f.reserve(3, MB, 32, 1);
    const std::vector<int32_t> table_a = {5, 6, 7, 8}, table_b = {0, 1, 2, 3};
    auto slot = [&](const std::vector<int32_t>& t, int p) { return t[size_t(p / bs)] * bs + p % bs; };
    const std::vector<float> ra = test::full_forward_logits(m, a), rb = test::full_forward_logits(m, b);
    std::vector<int32_t> packed(a.begin(), a.begin() + pa), pos, slots;
    packed.insert(packed.end(), b.begin(), b.begin() + pb);
    for (int p = 0; p < pa; ++p) pos.push_back(p), slots.push_back(slot(table_a, p));
    for (int p = 0; p < pb; ++p) pos.push_back(p), slots.push_back(slot(table_b, p));
    f.prefill(packed, pos, slots, {0, pa, pa + pb}, pa, {pa - 1, pa + pb - 1});
    double worst = 0;
    auto compare = [&](const float* got, const std::vector<float>& ref, int p) {
      for (int v = 0; v < V; ++v) {
        const double d = std::fabs(got[v] - ref[test::len(int64_t(p) * V + v)]);
        worst = std::max(worst, std::isnan(d) ? 1e30 : d);
      }
    };
    compare(f.logits(), ra, pa - 1);
    compare(f.logits() + V, rb, pb - 1);
    for (int step = 0;; ++step) {
      DecodeBatch db;
      std::vector<bool> is_a;
      auto add = [&](const std::vector<int32_t>& seq, const std::vector<int32_t>& table, int p) {
        db.tokens.push_back(seq[test::len(p)]);
        db.positions.push_back(p);
        db.slots.push_back(slot(table, p));
        db.seq_lens.push_back(p + 1);
        db.block_tables.insert(db.block_tables.end(), table.begin(), table.end());
        db.max_seq_len = std::max(db.max_seq_len, p + 1);
        ++db.B;
      };
      if (pa + step < int(a.size())) add(a, table_a, pa + step), is_a.push_back(true);
      if (pb + step < int(b.size())) add(b, table_b, pb + step), is_a.push_back(false);
      if (db.B == 0) break;
      f.decode(db, /*use_graph=*/false);
      for (int r = 0; r < db.B; ++r)
        compare(f.logits() + int64_t(r) * V, is_a[size_t(r)] ? ra : rb, db.positions[size_t(r)]);
    }
    BOOST_TEST_INFO("model kind " << int(kind));
    BOOST_TEST(worst <= 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(generation_logprobs_equal_training_logprobs) {
  for (TinyKind kind : kAllKinds) {
    const test::TinyModel m = test::tiny_model(kind, 200 + int(kind));
    auto gen = make_cpu_generator(m.config, m.weights);
    std::vector<GenerationRequest> req;
    for (int i = 0; i < 6; ++i) req.push_back({random_tokens(3 + i, m.config.vocab_size, 10 + i), i});
    SamplingParams p = sampling(0.7f);
    p.top_p = 0.9f;  // filters change what can be drawn, never the recorded full-vocabulary logprob
    const auto out = gen->generate(req, p, no_stop(10), 42, 3, 64);
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
    auto gen = make_cpu_generator(m.config, m.weights);
    SamplingParams p;
    p.greedy = true;
    const std::vector<GenerationRequest> req = {{random_tokens(4, m.config.vocab_size, 7), 0},
                                                {random_tokens(6, m.config.vocab_size, 8), 1}};
    const auto a = gen->generate(req, p, no_stop(8), 1, 0, 64);
    const auto b = gen->generate(req, p, no_stop(8), 999, 5, 64);  // greedy ignores seed and step
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
  const Rollout alone = make_cpu_generator(m.config, m.weights)->generate({target}, p, stop, 5, 2, 64)[0];

  // 17 others of various lengths, the target somewhere in the middle, then shuffled, with several numbers of
  // sequences running at once.
  std::vector<GenerationRequest> batch;
  for (int i = 0; i < 17; ++i) batch.push_back({random_tokens(2 + (i * 5) % 11, V, 500 + i), i});
  batch.insert(batch.begin() + 9, target);
  std::mt19937_64 g(3);
  for (int max_seqs : {256, 1, 4, 7}) {
    std::shuffle(batch.begin(), batch.end(), g);
    GenerationOptions o;
    o.max_num_seqs = max_seqs;
    auto gen = make_cpu_generator(m.config, m.weights, o);
    const auto out = gen->generate(batch, p, stop, 5, 2, 64);
    BOOST_REQUIRE_EQUAL(out.size(), batch.size());
    int found = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      BOOST_TEST(out[i].prompt == batch[i].prompt);
      BOOST_TEST(out[i].sample_index == batch[i].sample_index);
      if (batch[i].sample_index != target.sample_index) continue;
      ++found;
      BOOST_TEST_INFO("max_num_seqs " << max_seqs);
      BOOST_TEST(out[i].completion == alone.completion);
      // Within a few ulps: BLAS may sum a row in another order when the batch has another number of rows.
      for (size_t t = 0; t < alone.logprobs.size(); ++t)
        BOOST_TEST(std::fabs(out[i].logprobs[t] - alone.logprobs[t]) <= 1e-6 * (1 + std::fabs(alone.logprobs[t])));
    }
    BOOST_TEST(found == 1);
    // One at a time: a prefill for every sequence; otherwise at least as many as the running limit needs.
    if (max_seqs == 1) BOOST_TEST(gen->stats().waves == int64_t(batch.size()));
    BOOST_TEST(gen->stats().waves >= (int64_t(batch.size()) + max_seqs - 1) / max_seqs);
    BOOST_TEST(gen->stats().preemptions == 0);  // the CPU's cache holds what the call runs at once
  }
}

BOOST_AUTO_TEST_CASE(sampling_is_keyed_by_seed_step_and_sample_index) {
  const test::TinyModel m = test::tiny_model(TinyKind::qwen2_untied, 500);
  auto gen = make_cpu_generator(m.config, m.weights);
  const std::vector<int32_t> prompt = random_tokens(5, m.config.vocab_size, 9);
  const SamplingParams p = sampling(1.5f);  // flat enough that 16 tokens almost surely differ somewhere
  auto run = [&](uint64_t seed, uint32_t step, int64_t sample) {
    return gen->generate({{prompt, sample}}, p, no_stop(16), seed, step, 64)[0].completion;
  };
  const auto base = run(1, 0, 0);
  BOOST_TEST(run(1, 0, 0) == base);
  BOOST_TEST(run(2, 0, 0) != base);
  BOOST_TEST(run(1, 1, 0) != base);
  BOOST_TEST(run(1, 0, 1) != base);
}

BOOST_AUTO_TEST_CASE(an_in_place_refit_is_seen_by_the_next_call) {
  test::TinyModel m = test::tiny_model(TinyKind::qwen3_untied, 600);
  auto gen = make_cpu_generator(m.config, m.weights);
  const std::vector<GenerationRequest> req = {{random_tokens(5, m.config.vocab_size, 4), 0}};
  const SamplingParams p = sampling(1.0f);
  const auto before = gen->generate(req, p, no_stop(6), 1, 0, 64)[0];
  float* lm = m.weights.lm_head.f32();
  for (int64_t i = 0; i < m.weights.lm_head.numel(); ++i) lm[i] *= 3.0f;  // what a refit does: same memory
  const auto after = gen->generate(req, p, no_stop(6), 1, 0, 64)[0];
  const auto ref = test::full_forward_logprobs(m, after.prompt, after.completion, 1.0f);
  for (size_t i = 0; i < ref.size(); ++i) BOOST_TEST(std::fabs(after.logprobs[i] - ref[i]) <= 1e-5);
  BOOST_TEST(after.logprobs[0] != before.logprobs[0]);
}

BOOST_AUTO_TEST_SUITE_END()
