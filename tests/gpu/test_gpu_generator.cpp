// The GPU generation engine against the CPU engine and against itself under different schedules. Tolerances
// (bf16 on the GPU, fp32 on the CPU with the same bf16-rounded weights):
//   * greedy vs CPU: a completion may differ from the CPU's only from a position whose CPU top-1/top-2 logit
//     margin is below kMargin (a bf16 logit error can only flip a near tie); before it tokens are equal and
//     logprobs within 0.15 (bf16 vs fp32; measured up to 0.13 on an H100); at least half the sequences must be identical with the same finish reason;
//   * sampled vs CPU (same seed): >= 80% of sequences identical (the fraction is printed; 85% on an H100);
//   * GPU vs GPU (tiny cache with preemptions vs big cache, graphs on/off, shared prefix on/off): the kernels see
//     different batch shapes (GEMM algorithms, split counts), so bits may differ: >= 90% of sequences identical,
//     and logprobs of the common prefix within 0.15;
//   * token_mult_prob_error (mean over tokens of exp|generation logprob - training-path logprob|) <= 1.01.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <random>

#include "generation/generation_forward.h"
#include "generation/generator.h"
#include "gpu_transformer_test_util.h"
#include "model/transformer.h"

namespace {

constexpr float kMargin = 0.15f;

// A tiny untied qwen3 model; lm_scale 5 spreads the logits widely (std ~ 4) so near ties are rare.
struct GenModel {
  hone::ModelConfig c;
  hone::ModelWeights w;
  test::ScopedGpuContext g;
  std::unique_ptr<hone::GpuTransformer> gpu;

  explicit GenModel(uint64_t seed, float lm_scale = 5.f) : c(test::gpu_tiny_config(hone::Architecture::qwen3, false)) {
    w = test::gpu_test_weights(c, seed, 0.08f);
    float* lm = w.lm_head.f32();
    for (int64_t i = 0; i < w.lm_head.numel(); ++i) lm[i] = test::bf16_round(lm[i] * lm_scale);
    gpu = std::make_unique<hone::GpuTransformer>(c, hone::ParamLayout::of(c), g.ctx, 512);
    gpu->upload_weights(w);
  }
  hone::Generator<hone::CudaBackend> generator(hone::GenerationOptions o = {}) {
    return hone::Generator<hone::CudaBackend>(c, hone::ParamLayout::of(c), gpu->weights(), g.ctx, o);
  }
};

std::vector<hone::GenerationRequest> make_requests(int prompts, int G, int min_len, int max_len, int vocab,
                                                   uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> p(static_cast<size_t>(prompts));
  for (auto& x : p) {
    x.resize(size_t(std::uniform_int_distribution<int>(min_len, max_len)(rng)));
    for (auto& t : x) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  return hone::group_requests(p, G, 100);
}

// Greedy CPU generation of one request with the top-1/top-2 margin of every step.
void cpu_greedy_margins(const GenModel& m, const std::vector<int32_t>& prompt, int max_new,
                        const std::vector<int32_t>& stop_ids, std::vector<int32_t>& tokens,
                        std::vector<float>& margins) {
  // The CPU's generation forward over one sequence in consecutive blocks of 16 tokens.
  const int n = int(prompt.size()) + max_new, bs = 16, blocks = (n + bs - 1) / bs;
  hone::GenerationForward<hone::CpuBackend> fwd(m.c, hone::param_layout_of(m.w), m.w.flat.f32(),
                                                hone::CpuBackend::Exec{});
  fwd.allocate_cache(blocks, bs);
  fwd.reserve(1, blocks, n, 1);
  std::vector<int32_t> pos(prompt.size()), slots(prompt.size()), table(static_cast<size_t>(blocks));
  for (size_t p = 0; p < prompt.size(); ++p) pos[p] = int32_t(p), slots[p] = int32_t(p);  // block b holds slots b*16..
  for (int b = 0; b < blocks; ++b) table[size_t(b)] = b;
  fwd.prefill(prompt, pos, slots, {0, int32_t(prompt.size())}, int(prompt.size()), {int32_t(prompt.size()) - 1});
  const int V = m.c.vocab_size;
  std::vector<float> logits(fwd.logits(), fwd.logits() + V);
  tokens.clear();
  margins.clear();
  for (int i = 0; i < max_new; ++i) {
    std::vector<float> s = logits;
    std::partial_sort(s.begin(), s.begin() + 2, s.end(), std::greater<float>());
    margins.push_back(s[0] - s[1]);
    const int32_t t = hone::greedy_token(logits);
    tokens.push_back(t);
    if (std::find(stop_ids.begin(), stop_ids.end(), t) != stop_ids.end() || i + 1 == max_new) break;
    const int32_t p = int32_t(prompt.size()) + i;
    hone::DecodeBatch db;
    db.B = 1;
    db.tokens = {t}, db.positions = {p}, db.slots = {p}, db.seq_lens = {p + 1}, db.block_tables = table;
    db.max_seq_len = p + 1;
    fwd.decode(db, /*use_graph=*/false);
    logits.assign(fwd.logits(), fwd.logits() + V);
  }
}

struct Agreement {
  double identical = 0;       // fraction of sequences with identical completions and finish reasons
  double max_logprob_diff = 0;  // over the common prefix of every pair
};

Agreement agree(const std::vector<hone::Rollout>& a, const std::vector<hone::Rollout>& b) {
  BOOST_REQUIRE(a.size() == b.size());
  Agreement r;
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i].sample_index == b[i].sample_index);
    BOOST_TEST(a[i].prompt == b[i].prompt);
    BOOST_TEST((a[i].finish_reason != hone::FinishReason::none));
    BOOST_TEST(a[i].completion.size() == a[i].logprobs.size());
    const bool eq = a[i].completion == b[i].completion && a[i].finish_reason == b[i].finish_reason;
    same += eq;
    for (size_t j = 0; j < std::min(a[i].completion.size(), b[i].completion.size()); ++j) {
      if (a[i].completion[j] != b[i].completion[j]) break;
      r.max_logprob_diff = std::max(r.max_logprob_diff, double(std::fabs(a[i].logprobs[j] - b[i].logprobs[j])));
    }
  }
  r.identical = double(same) / double(a.size());
  return r;
}

hone::StopCriteria stops(int max_new) {
  hone::StopCriteria s;
  s.max_new_tokens = max_new;
  s.stop_token_ids = {7, 11};
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_generator)

BOOST_AUTO_TEST_CASE(greedy_equals_cpu_token_for_token, *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(31);
  const auto req = make_requests(6, 3, 3, 40, m.c.vocab_size, 1);
  hone::SamplingParams sp;
  sp.greedy = true;
  const hone::StopCriteria st = stops(16);
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.01;
  auto gen = m.generator(o);
  const auto gpu = gen.generate(req, sp, st, 5, 2, 256);
  const auto cpu = hone::make_cpu_generator(m.c, m.w)->generate(req, sp, st, 5, 2, 256);
  int64_t compared = 0, total = 0, full = 0;
  for (size_t i = 0; i < req.size(); ++i) {
    std::vector<int32_t> toks;
    std::vector<float> margins;
    cpu_greedy_margins(m, req[i].prompt, 16, st.stop_token_ids, toks, margins);
    BOOST_TEST(toks == cpu[i].completion);  // the margin reference is the CPU engine
    total += int64_t(toks.size());
    const std::vector<int32_t>& g = gpu[i].completion;
    size_t j = 0;
    while (j < toks.size() && j < g.size() && g[j] == toks[j]) {
      BOOST_TEST(std::fabs(gpu[i].logprobs[j] - cpu[i].logprobs[j]) < 0.15);
      ++j;
    }
    compared += int64_t(j);
    if (j < toks.size() && j < g.size()) {
      BOOST_TEST(margins[j] < kMargin, "sequence " << i << " differs at position " << j << " where the CPU margin is "
                                                   << margins[j]);
    } else {
      BOOST_TEST(g.size() == toks.size(), "sequence " << i << ": same tokens, different lengths");
      BOOST_TEST((gpu[i].finish_reason == cpu[i].finish_reason));
      full += g.size() == toks.size();
    }
  }
  BOOST_TEST_MESSAGE("greedy vs CPU: " << compared << " of " << total << " tokens equal before any difference, "
                                       << full << " of " << req.size() << " sequences identical");
  BOOST_TEST(2 * full >= int64_t(req.size()));
  BOOST_TEST(gen.stats().generated_tokens == [&] {
    int64_t n = 0;
    for (const auto& r : gpu) n += int64_t(r.completion.size());
    return n;
  }());
  BOOST_TEST(gen.stats().shared_prefix_rows > 0);
}

BOOST_AUTO_TEST_CASE(sampling_matches_cpu_with_the_same_seed, *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(32);
  const auto req = make_requests(32, 4, 3, 30, m.c.vocab_size, 2);
  hone::SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_k = 50;
  const hone::StopCriteria st = stops(4);
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.01;
  auto gen = m.generator(o);
  const auto gpu = gen.generate(req, sp, st, 77, 3, 256);
  const auto cpu = hone::make_cpu_generator(m.c, m.w)->generate(req, sp, st, 77, 3, 256);
  const Agreement a = agree(gpu, cpu);
  BOOST_TEST_MESSAGE("sampled vs CPU: " << 100 * a.identical << "% of sequences identical, logprob diff "
                                        << a.max_logprob_diff);
  BOOST_TEST(a.identical >= 0.8);  // 85% on an H100: after the first draw at a near tie the sequences part
  // The largest difference over ~1000 sampled tokens of bf16 against fp32 logits (temperature 0.9): 0.13 and 0.19 on
  // H100s in two builds whose every op matched its CPU twin as before (the tensor-parallel cases see 0.13-0.19 too).
  BOOST_TEST(a.max_logprob_diff < 0.25);
}

BOOST_AUTO_TEST_CASE(tiny_cache_preempts_and_gives_the_same_rollouts,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(33);
  const auto req = make_requests(8, 4, 5, 20, m.c.vocab_size, 3);
  for (bool greedy : {true, false}) {
    hone::SamplingParams sp;
    sp.greedy = greedy;
    const hone::StopCriteria st = stops(24);
    hone::GenerationOptions big, tiny;
    big.kv_cache_gib = 0.01;
    tiny.block_size = 8;
    const int64_t block = hone::GenerationForward<hone::CudaBackend>::block_bytes(m.c, 8, m.c.num_key_value_heads);
    tiny.kv_cache_gib = 20.5 * double(block) / double(1 << 30);
    auto g_big = m.generator(big);
    auto g_tiny = m.generator(tiny);
    const auto a = g_big.generate(req, sp, st, 9, 1, 256);
    const auto b = g_tiny.generate(req, sp, st, 9, 1, 256);
    BOOST_TEST(g_big.stats().preemptions == 0);
    BOOST_TEST(g_tiny.stats().preemptions > 0);
    BOOST_TEST(g_tiny.stats().kv_capacity_tokens == 160);
    const Agreement ag = agree(a, b);
    BOOST_TEST_MESSAGE((greedy ? "greedy" : "sampled") << " tiny vs big cache: " << g_tiny.stats().preemptions
                                                        << " preemptions, " << 100 * ag.identical
                                                        << "% identical, logprob diff " << ag.max_logprob_diff);
    // Greedy: 100% identical with 28 preemptions on an H100. Sampled: 66% (39 preemptions): the recomputed
    // prefill and other batch shapes round bf16 differently, and a draw near a CDF boundary then parts the sequence.
    BOOST_TEST(ag.identical >= (greedy ? 0.9 : 0.5));
    BOOST_TEST(ag.max_logprob_diff < 0.15);
  }
}

BOOST_AUTO_TEST_CASE(graphs_and_shared_prefix_change_nothing, *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(34);
  const auto req = make_requests(10, 5, 3, 50, m.c.vocab_size, 4);
  hone::SamplingParams sp;
  const hone::StopCriteria st = stops(30);
  hone::GenerationOptions base;
  base.kv_cache_gib = 0.01;
  base.max_num_seqs = 24;  // several batch buckets as sequences finish
  hone::GenerationOptions no_graphs = base, no_share = base, prefix_path = base;
  no_graphs.cuda_graphs = false;
  no_share.shared_prefix = false;
  prefix_path.prefix_attention = true;  // the groups' prompt blocks through the shared-prefix attention path
  auto g0 = m.generator(base);
  auto g1 = m.generator(no_graphs);
  auto g2 = m.generator(no_share);
  auto g3 = m.generator(prefix_path);
  const auto a = g0.generate(req, sp, st, 4, 8, 256);
  const auto again = g0.generate(req, sp, st, 4, 8, 256);  // replays the graphs captured by the first call
  const auto b = g1.generate(req, sp, st, 4, 8, 256);
  const auto c = g2.generate(req, sp, st, 4, 8, 256);
  const auto p = g3.generate(req, sp, st, 4, 8, 256);
  BOOST_TEST(g0.stats().cuda_graph_replays > 0);
  BOOST_TEST(g1.stats().cuda_graph_replays == 0);
  BOOST_TEST(g0.stats().shared_prefix_rows > 0);
  BOOST_TEST(g2.stats().shared_prefix_rows == 0);
  BOOST_TEST(g2.stats().peak_kv_bytes > g0.stats().peak_kv_bytes);
  BOOST_TEST(g3.stats().shared_prefix_rows == g0.stats().shared_prefix_rows);
  BOOST_TEST(g3.stats().cuda_graph_replays > 0);
  const Agreement r = agree(a, again), ab = agree(a, b), ac = agree(a, c), ap = agree(a, p);
  BOOST_TEST_MESSAGE("graph replay " << 100 * r.identical << "%, graphs off " << 100 * ab.identical
                                     << "%, shared prefix off " << 100 * ac.identical << "%, prefix attention "
                                     << 100 * ap.identical << "% identical");
  BOOST_TEST(r.identical == 1.0);  // the same schedule and shapes: bitwise
  BOOST_TEST(ab.identical >= 0.9);
  BOOST_TEST(ac.identical >= 0.9);
  BOOST_TEST(ab.max_logprob_diff < 0.15);
  BOOST_TEST(ac.max_logprob_diff < 0.15);
  BOOST_TEST(ap.identical >= 0.9);
  BOOST_TEST(ap.max_logprob_diff < 0.15);
  // Refit in place: new weights are seen by the captured graphs (a different model, different completions).
  hone::ModelWeights w2 = test::gpu_test_weights(m.c, 99, 0.08f);
  m.gpu->upload_weights(w2);
  const auto d = g0.generate(req, sp, st, 4, 8, 256);
  BOOST_TEST(agree(a, d).identical < 0.5);
  g0.release();
  const auto e = g0.generate(req, sp, st, 4, 8, 256);  // everything allocated again after release()
  BOOST_TEST(agree(d, e).identical >= 0.9);
}

BOOST_AUTO_TEST_CASE(token_mult_prob_error_against_the_training_path,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(35, 1.f);  // logits of a realistic spread (std ~ 1)
  const auto req = make_requests(8, 4, 4, 40, m.c.vocab_size, 5);
  hone::SamplingParams sp;
  sp.temperature = 0.8f;
  const hone::StopCriteria st = stops(40);
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.01;
  auto gen = m.generator(o);
  const auto out = gen.generate(req, sp, st, 6, 1, 256);
  std::vector<std::vector<int32_t>> seqs;
  for (const auto& r : out) {
    std::vector<int32_t> s = r.prompt;
    s.insert(s.end(), r.completion.begin(), r.completion.end());
    seqs.push_back(s);
  }
  const hone::PackedBatch batch = hone::PackedBatch::pack(seqs);
  m.gpu->forward(batch, sp.temperature, false, false);
  const std::vector<float> lp = m.gpu->logprobs_host();
  double sum = 0, max_diff = 0;
  int64_t n = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const int begin = batch.seq_begin(int(i)) + int(out[i].prompt.size()) - 1;
    for (size_t j = 0; j < out[i].completion.size(); ++j) {
      const double d = std::fabs(double(out[i].logprobs[j]) - double(lp[size_t(begin) + j]));
      sum += std::exp(d);
      max_diff = std::max(max_diff, d);
      ++n;
    }
  }
  const double mpe = sum / double(n);
  BOOST_TEST_MESSAGE("token_mult_prob_error " << mpe << " over " << n << " tokens, max |diff| " << max_diff);
  BOOST_TEST(n > 100);
  BOOST_TEST(mpe <= 1.01);
}

// Each request's own max_new_tokens (the long-tail benchmark's drawn lengths): every completion has exactly its
// length, with a big cache and with a tiny one that preempts; the call's tail statistics follow from the lengths
// when every sequence starts in the first prefill (see tests/unit/test_generation_tail.cpp for the CPU engine).
BOOST_AUTO_TEST_CASE(each_request_stops_at_its_own_length, *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(37);
  auto req = make_requests(6, 4, 3, 12, m.c.vocab_size, 6);
  std::mt19937 rng(8);
  std::vector<int64_t> lengths;
  for (auto& r : req) {
    r.max_new_tokens = std::uniform_int_distribution<int>(1, 40)(rng);
    lengths.push_back(r.max_new_tokens);
  }
  hone::StopCriteria st;  // nothing stops a sample before its length
  st.max_new_tokens = 40;
  hone::SamplingParams sp;
  hone::GenerationOptions big, tiny;
  big.kv_cache_gib = 0.01;
  tiny.block_size = 8;
  tiny.kv_cache_gib = 12.5 * double(hone::GenerationForward<hone::CudaBackend>::block_bytes(m.c, 8, m.c.num_key_value_heads)) /
                      double(1 << 30);
  for (const hone::GenerationOptions& o : {big, tiny}) {
    auto gen = m.generator(o);
    const auto out = gen.generate(req, sp, st, 3, 1, 256);
    for (size_t i = 0; i < out.size(); ++i) {
      BOOST_TEST(int64_t(out[i].completion.size()) == lengths[i], "request " << i);
      BOOST_TEST((out[i].finish_reason == hone::FinishReason::length));
    }
    const hone::GenerationTail& g = gen.stats().tail;
    int64_t total = 0, rows = 0;
    for (int64_t n : lengths) total += n, rows += n - 1;
    BOOST_TEST(g.generated_tokens == total);
    BOOST_TEST(g.seconds > 0.0);
    BOOST_TEST(g.tail_seconds <= g.seconds);
    BOOST_TEST(g.batch_slots == g.decode_steps * o.max_num_seqs);
    BOOST_TEST_MESSAGE("own lengths, " << gen.stats().preemptions << " preemptions: occupancy " << g.occupancy()
                                       << ", tail " << g.tail_seconds << " s of " << g.seconds << " s");
    if (gen.stats().preemptions > 0 || gen.stats().prefill_passes != 1) continue;
    std::vector<int64_t> sorted = lengths;
    std::sort(sorted.begin(), sorted.end());
    const int64_t kth = sorted[size_t(std::ceil(0.9 * double(sorted.size()))) - 1];
    int64_t by_then = 0;
    for (int64_t n : lengths) by_then += std::min(n, kth);
    BOOST_TEST(g.decode_rows == rows);
    BOOST_TEST(g.decode_steps == sorted.back() - 1);
    BOOST_TEST(g.tail_tokens == total - by_then);
  }
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused, *boost::unit_test::precondition(test::needs_gpu)) {
  GenModel m(36);
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.01;
  auto gen = m.generator(o);
  hone::SamplingParams sp;
  const hone::StopCriteria st = stops(4);
  BOOST_CHECK_THROW(gen.generate({{{}, 0}}, sp, st, 1, 1, 64), hone::UserError);
  BOOST_CHECK_THROW(gen.generate({{{1, 400}, 0}}, sp, st, 1, 1, 64), hone::UserError);
  BOOST_CHECK_THROW(gen.generate({{{1, 2, 3}, 0}}, sp, st, 1, 1, 3), hone::UserError);
  BOOST_TEST(gen.generate({}, sp, st, 1, 1, 64).empty());
  hone::GenerationOptions small;
  small.kv_cache_gib = 1e-6;  // no room for one sequence
  auto g2 = m.generator(small);
  BOOST_CHECK_THROW(g2.generate({{{1, 2, 3}, 0}}, sp, st, 1, 1, 64), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
