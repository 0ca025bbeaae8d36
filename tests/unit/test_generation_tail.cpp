// The tail metrics of a generation call (generation/generation_tail.h) on hand-made timelines, and the
// timeline the CPU generator records, checked against what the requests' own lengths imply.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <random>

#include "common/finite_diff.h"
#include "generation/generator.h"
#include "generation/generation_tail.h"
#include "unit/test_generator_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(generation_tail_metrics)

// 10 sequences: 4 stop at 1.0 s, 3 at 2.0 s, 2 at 3.0 s (9 of 10 = 90 %), the last at 7.5 s.
BOOST_AUTO_TEST_CASE(the_tail_starts_when_90_percent_have_stopped) {
  GenerationTimeline t;
  t.sequences = 10;
  t.max_num_seqs = 8;
  t.pass(0.5, 0, 80);  // no mark: nothing stopped
  t.pass(1.0, 4, 100);
  t.pass(1.5, 4, 130);
  t.pass(2.0, 7, 150);
  t.pass(3.0, 9, 200);
  t.pass(7.5, 10, 245);
  for (int rows : {8, 8, 6, 6, 3, 1, 1, 1}) t.decode_step(rows);
  t.end(8.0, 245);
  BOOST_TEST(t.marks.size() == 4u);

  const GenerationTail g = generation_tail(t);
  BOOST_TEST(g.seconds == 8.0);
  BOOST_TEST(g.generated_tokens == 245);
  BOOST_TEST(g.tokens_per_s() == 245.0 / 8.0);
  BOOST_TEST(g.tail_seconds == 8.0 - 3.0);
  BOOST_TEST(g.tail_tokens == 245 - 200);
  BOOST_TEST(g.decode_steps == 8);
  BOOST_TEST(g.mean_running() == 34.0 / 8.0);
  BOOST_TEST(g.occupancy() == 34.0 / 64.0);

  // The share is a parameter: half of them had stopped at 2.0 s.
  BOOST_TEST(generation_tail(t, 0.5).tail_seconds == 6.0);
  BOOST_TEST(generation_tail(t, 0.5).tail_tokens == 95);
}

BOOST_AUTO_TEST_CASE(the_share_rounds_up_to_a_whole_sequence) {
  // 11 sequences: 90 % is 9.9, so the tail starts at the 10th, not the 9th.
  GenerationTimeline t;
  t.sequences = 11;
  t.pass(1.0, 9, 90);
  t.pass(2.0, 10, 100);
  t.pass(4.0, 11, 120);
  t.end(4.0, 120);
  BOOST_TEST(generation_tail(t).tail_seconds == 2.0);
  BOOST_TEST(generation_tail(t).tail_tokens == 20);
  // One sequence: the tail starts when it stops, at the end.
  GenerationTimeline one;
  one.sequences = 1;
  one.pass(3.0, 1, 30);
  one.end(3.25, 30);
  BOOST_TEST(generation_tail(one).tail_seconds == 0.25);
  BOOST_TEST(generation_tail(one).tail_tokens == 0);
}

BOOST_AUTO_TEST_CASE(empty_calls_and_several_calls) {
  const GenerationTail none = generation_tail(GenerationTimeline{});
  BOOST_TEST(none.tokens_per_s() == 0.0);
  BOOST_TEST(none.mean_running() == 0.0);
  BOOST_TEST(none.occupancy() == 0.0);
  BOOST_TEST(none.tail_seconds == 0.0);

  GenerationTail a, b;
  a.seconds = 2, a.generated_tokens = 100, a.tail_seconds = 0.5, a.tail_tokens = 10;
  a.decode_steps = 10, a.decode_rows = 40, a.batch_slots = 80;
  b.seconds = 1, b.generated_tokens = 50, b.tail_seconds = 0.25, b.tail_tokens = 5;
  b.decode_steps = 10, b.decode_rows = 20, b.batch_slots = 80;
  a.add(b);
  BOOST_TEST(a.tokens_per_s() == 50.0);
  BOOST_TEST(a.tail_seconds == 0.75);
  BOOST_TEST(a.tail_tokens == 15);
  BOOST_TEST(a.mean_running() == 3.0);
  BOOST_TEST(a.occupancy() == 60.0 / 160.0);
}

// One wave, every request with its own length L_i: the prefill gives token 1 of every sequence, decode step j
// token j + 1 of those with L_i > j. So sequence i stops in pass L_i, there are max L - 1 decode steps holding
// sum (L_i - 1) rows, and by the pass where the k-th shortest stopped the call had generated sum min(L_i, L_(k)).
BOOST_AUTO_TEST_CASE(the_generator_records_its_timeline_on_the_cpu) {
  const test::TinyModel m = test::tiny_model(test::TinyKind::qwen3_tied, 3);
  const std::vector<int64_t> lengths = {5, 1, 9, 3, 3, 7, 2, 6, 4, 12};
  std::mt19937_64 rng(5);
  std::vector<GenerationRequest> reqs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::vector<int32_t> prompt(test::len(4));
    for (int32_t& x : prompt) x = int32_t(rng() % uint64_t(m.config.vocab_size));
    reqs.push_back({prompt, int64_t(i), lengths[i]});
  }
  StopCriteria stop;
  stop.max_new_tokens = 16;
  GenerationOptions o;
  o.max_num_seqs = 16;
  auto gen = make_cpu_generator(m.config, m.weights, o);
  const std::vector<Rollout> out = gen->generate(reqs, SamplingParams{}, stop, 1, 0, 64);

  int64_t total = 0, rows = 0;
  for (int64_t n : lengths) total += n, rows += n - 1;
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const int64_t kth = sorted[8];  // 9 of 10 stopped: the 9th shortest
  int64_t by_then = 0;
  for (int64_t n : lengths) by_then += std::min(n, kth);

  const GenerationTail& g = gen->stats().tail;
  BOOST_TEST(g.generated_tokens == total);
  BOOST_TEST(g.tail_tokens == total - by_then);
  BOOST_TEST(g.decode_steps == sorted.back() - 1);
  BOOST_TEST(g.decode_rows == rows);
  BOOST_TEST(g.batch_slots == g.decode_steps * 16);
  BOOST_TEST(g.seconds > 0.0);
  BOOST_TEST(g.tail_seconds > 0.0);
  BOOST_TEST(g.tail_seconds < g.seconds);
  BOOST_TEST(g.tokens_per_s() > 0.0);
  for (size_t i = 0; i < out.size(); ++i) BOOST_TEST(int64_t(out[i].completion.size()) == lengths[i]);
}

BOOST_AUTO_TEST_SUITE_END()
