// Transformer behaviour beyond raw gradients: packing is invisible, recompute is bitwise neutral, tied
// embeddings collect both gradients, masked targets contribute nothing, and the activation memory is as planned.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>

#include "runtime/error.h"
#include "transformer_test_util.h"

namespace {

using hone::Architecture;

struct RunResult {
  std::vector<float> logprob, entropy, grad;
};

RunResult run(hone::Transformer& m, const hone::ModelConfig& c, const hone::PackedBatch& b, float temperature) {
  m.forward(b, temperature, true);
  const int T = b.num_tokens();
  RunResult r;
  r.logprob.assign(m.logprobs(), m.logprobs() + T);
  r.entropy.assign(m.entropy(), m.entropy() + T);
  const auto cw = test::logprob_weights(T), ew = test::entropy_weights(T);
  hone::ModelWeights g = hone::allocate_weights(c);
  m.backward(cw.data(), ew.data(), g);
  r.grad.assign(g.flat.f32(), g.flat.f32() + g.flat.numel());
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transformer)

BOOST_AUTO_TEST_CASE(packed_batch_layout) {
  const auto b = hone::PackedBatch::pack({{5, 6, 7}, {8}, {9, 10}});
  BOOST_TEST(b.num_tokens() == 6);
  BOOST_TEST(b.num_seqs() == 3);
  BOOST_TEST(b.cu_seqlens == (std::vector<int32_t>{0, 3, 4, 6}));
  BOOST_TEST(b.positions == (std::vector<int32_t>{0, 1, 2, 0, 0, 1}));
  BOOST_TEST(b.targets == (std::vector<int32_t>{6, 7, -1, -1, 10, -1}));
  hone::PackedBatch m;
  const std::vector<int32_t> ids{1, 2, 3, 4};
  const uint8_t keep[] = {0, 1, 1};
  m.append(ids.data(), 4, keep);
  BOOST_TEST(m.targets == (std::vector<int32_t>{-1, 3, 4, -1}));
}

BOOST_AUTO_TEST_CASE(split_by_tokens_respects_the_budget) {
  const auto g = hone::split_by_tokens({3, 4, 2, 9, 1, 1}, 7);
  BOOST_TEST(g.size() == 4u);
  BOOST_TEST((g[0] == std::pair<int, int>(0, 2)));  // 3 + 4
  BOOST_TEST((g[1] == std::pair<int, int>(2, 3)));  // 2 (+9 would exceed)
  BOOST_TEST((g[2] == std::pair<int, int>(3, 4)));  // 9 alone, longer than the budget
  BOOST_TEST((g[3] == std::pair<int, int>(4, 6)));
}

// Packing several sequences into one row gives the same logprobs and entropies as running them one by one.
BOOST_AUTO_TEST_CASE(packed_equals_one_by_one) {
  for (Architecture arch : {Architecture::llama, Architecture::qwen2, Architecture::qwen3}) {
    const auto c = test::tiny_config(arch, arch == Architecture::qwen3);
    hone::ModelWeights w = hone::allocate_weights(c);
    test::randomize(w, 3);
    hone::Transformer m(c, w);
    const auto seqs = test::random_sequences({7, 3, 11, 5}, c.vocab_size, 5);
    const auto packed = run(m, c, hone::PackedBatch::pack(seqs), 1.f);

    std::vector<float> lp, en;
    for (const auto& s : seqs) {
      const auto one = run(m, c, hone::PackedBatch::pack({s}), 1.f);
      lp.insert(lp.end(), one.logprob.begin(), one.logprob.end());
      en.insert(en.end(), one.entropy.begin(), one.entropy.end());
    }
    BOOST_TEST(max_abs_diff(lp, packed.logprob) < 2e-5);
    BOOST_TEST(max_abs_diff(en, packed.entropy) < 2e-5);
  }
}

// Gradients: with the loss weights of the packed rows given to each sequence's own run, the summed per-sequence
// gradients equal the packed gradient.
BOOST_AUTO_TEST_CASE(packed_gradient_equals_sum_of_sequences) {
  const auto c = test::tiny_config(Architecture::qwen2, false);
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 4);
  hone::Transformer m(c, w);
  const auto seqs = test::random_sequences({6, 9, 4}, c.vocab_size, 8);
  const auto b = hone::PackedBatch::pack(seqs);
  const auto packed = run(m, c, b, 0.7f);
  const auto cw = test::logprob_weights(b.num_tokens()), ew = test::entropy_weights(b.num_tokens());

  hone::ModelWeights g = hone::allocate_weights(c);
  for (int s = 0; s < b.num_seqs(); ++s) {
    m.forward(hone::PackedBatch::pack({seqs[size_t(s)]}), 0.7f, true);
    m.backward(cw.data() + b.seq_begin(s), ew.data() + b.seq_begin(s), g);  // accumulates
  }
  double err = 0, ref = 0;
  for (int64_t i = 0; i < g.flat.numel(); ++i) {
    err += std::pow(double(g.flat.f32()[i]) - packed.grad[size_t(i)], 2);
    ref += std::pow(double(packed.grad[size_t(i)]), 2);
  }
  BOOST_TEST(ref > 0);
  BOOST_TEST(std::sqrt(err / ref) < 1e-5);
}

BOOST_AUTO_TEST_CASE(recompute_is_bitwise_identical) {
  for (Architecture arch : {Architecture::llama, Architecture::qwen3}) {
    auto c = test::tiny_config(arch, false);
    c.num_hidden_layers = 3;
    hone::ModelWeights w = hone::allocate_weights(c);
    test::randomize(w, 9);
    hone::Transformer m(c, w);
    const auto b = hone::PackedBatch::pack(test::random_sequences({8, 5, 10}, c.vocab_size, 2));
    const auto ref = run(m, c, b, 1.f);
    const size_t bytes_all_saved = m.forward_arena_peak();
    m.set_layer_recompute(1, true);  // one layer in the middle
    const auto mixed = run(m, c, b, 1.f);
    m.set_recompute(true);
    const auto all = run(m, c, b, 1.f);
    const size_t bytes_all_recomputed = m.forward_arena_peak();
    BOOST_TEST(bitwise_equal(ref.logprob, mixed.logprob));
    BOOST_TEST(bitwise_equal(ref.grad, mixed.grad));
    BOOST_TEST(bitwise_equal(ref.logprob, all.logprob));
    BOOST_TEST(bitwise_equal(ref.entropy, all.entropy));
    BOOST_TEST(bitwise_equal(ref.grad, all.grad));
    // three layers' activations saved vs one shared scratch
    BOOST_TEST(bytes_all_saved - bytes_all_recomputed ==
               2 * hone::Transformer::layer_activation_bytes(hone::layer_shape(c), b.num_tokens()));
    // Selective (every layer, and one layer among full and none): the same bits, less memory than none and more
    // than full.
    m.set_recompute(hone::Recompute::selective);
    const auto selective = run(m, c, b, 1.f);
    const size_t bytes_selective = m.forward_arena_peak();
    BOOST_TEST(bitwise_equal(ref.logprob, selective.logprob));
    BOOST_TEST(bitwise_equal(ref.entropy, selective.entropy));
    BOOST_TEST(bitwise_equal(ref.grad, selective.grad));
    BOOST_TEST(bytes_selective < bytes_all_saved);
    BOOST_TEST(bytes_selective > bytes_all_recomputed);
    m.set_recompute(hone::Recompute::none);
    m.set_layer_recompute(0, hone::Recompute::full);
    m.set_layer_recompute(1, hone::Recompute::selective);
    const auto three = run(m, c, b, 1.f);
    BOOST_TEST(bitwise_equal(ref.grad, three.grad));
  }
}

// A tied lm_head is a view of embed_tokens: its gradient must land there, equal to what an untied copy of the
// same model collects in embed_tokens and lm_head together.
BOOST_AUTO_TEST_CASE(tied_embedding_gradient_is_the_sum_of_both_uses) {
  const auto ct = test::tiny_config(Architecture::llama, true);
  const auto cu = test::tiny_config(Architecture::llama, false);
  hone::ModelWeights wt = hone::allocate_weights(ct), wu = hone::allocate_weights(cu);
  BOOST_TEST(wt.lm_head.f32() == wt.embed_tokens.f32());
  test::randomize(wt, 12);
  const auto nt = wt.named_parameters();
  for (const auto& [name, t] : wu.named_parameters()) {
    const std::string src = name == "lm_head.weight" ? "model.embed_tokens.weight" : name;
    for (const auto& [n2, t2] : nt)
      if (n2 == src) std::memcpy(t.f32(), t2.f32(), t.nbytes());
  }
  hone::Transformer mt(ct, wt), mu(cu, wu);
  const auto b = hone::PackedBatch::pack(test::random_sequences({9, 6}, ct.vocab_size, 1));
  const auto rt = run(mt, ct, b, 1.f);
  const auto ru = run(mu, cu, b, 1.f);
  BOOST_TEST(bitwise_equal(rt.logprob, ru.logprob));

  hone::ModelWeights gu = hone::allocate_weights(cu), gt = hone::allocate_weights(ct);
  std::memcpy(gu.flat.f32(), ru.grad.data(), ru.grad.size() * sizeof(float));
  std::memcpy(gt.flat.f32(), rt.grad.data(), rt.grad.size() * sizeof(float));
  double max_err = 0, lm_norm = 0;
  for (int64_t i = 0; i < gt.embed_tokens.numel(); ++i) {
    const double expect = double(gu.embed_tokens.f32()[i]) + gu.lm_head.f32()[i];
    max_err = std::max(max_err, std::fabs(expect - gt.embed_tokens.f32()[i]));
    lm_norm += std::pow(double(gu.lm_head.f32()[i]), 2);
  }
  BOOST_TEST(lm_norm > 1e-4);  // the LM head part is substantial
  BOOST_TEST(max_err < 1e-6);
}

// Rows whose target is masked get logprob 0 and pass no gradient, whatever their loss weight.
BOOST_AUTO_TEST_CASE(masked_targets_contribute_nothing) {
  const auto c = test::tiny_config(Architecture::qwen3, true);
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 21);
  hone::Transformer m(c, w);
  const auto seqs = test::random_sequences({8}, c.vocab_size, 4);
  hone::PackedBatch full = hone::PackedBatch::pack(seqs), masked;
  const uint8_t keep[] = {0, 0, 0, 1, 1, 1, 1};  // a prompt of 4 tokens, completion predicted from position 3
  masked.append(seqs[0].data(), 8, keep);
  const auto rf = run(m, c, full, 1.f);
  auto rm = run(m, c, masked, 1.f);
  for (int t = 0; t < 3; ++t) BOOST_TEST(rm.logprob[size_t(t)] == 0.f);
  // Within a few ulps, not bitwise: the masked run's LM head has fewer rows, and BLAS may then sum in another order.
  for (int t = 3; t < 7; ++t)
    BOOST_TEST(std::fabs(rm.logprob[size_t(t)] - rf.logprob[size_t(t)]) <= 1e-6 * (1 + std::fabs(rf.logprob[size_t(t)])));

  // The masked run's gradient equals the full run's with zero weight on the masked rows.
  std::vector<float> cw = test::logprob_weights(8), ew = test::entropy_weights(8);
  for (int t = 0; t < 3; ++t) cw[size_t(t)] = ew[size_t(t)] = 0.f;
  m.forward(full, 1.f, true);
  hone::ModelWeights g = hone::allocate_weights(c);
  m.backward(cw.data(), ew.data(), g);
  BOOST_TEST(max_abs_diff(std::vector<float>(g.flat.f32(), g.flat.f32() + g.flat.numel()), rm.grad) < 1e-5);
}

BOOST_AUTO_TEST_CASE(logprobs_are_normalized_and_entropy_bounded) {
  const auto c = test::tiny_config(Architecture::llama, false);
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 5);
  hone::Transformer m(c, w);
  const auto b = hone::PackedBatch::pack(test::random_sequences({12, 7}, c.vocab_size, 6));
  m.forward(b, 1.f, true);
  for (int t = 0; t < b.num_tokens(); ++t) {
    const float lp = m.logprobs()[t], h = m.entropy()[t];
    if (b.targets[size_t(t)] < 0) {
      BOOST_TEST(lp == 0.f);
      BOOST_TEST(h == 0.f);
    } else {
      BOOST_TEST(lp < 0.f);
      BOOST_TEST(h > 0.f);
      BOOST_TEST(h <= std::log(float(c.vocab_size)) + 1e-5f);
    }
  }
  // A very high temperature flattens the distribution toward uniform.
  m.forward(b, 1000.f, true);
  BOOST_TEST(std::fabs(m.entropy()[0] - std::log(float(c.vocab_size))) < 1e-3);
  BOOST_TEST(std::fabs(m.logprobs()[0] + std::log(float(c.vocab_size))) < 1e-2);
}

BOOST_AUTO_TEST_CASE(backward_without_forward_is_refused) {
  const auto c = test::tiny_config(Architecture::llama, false);
  hone::ModelWeights w = hone::allocate_weights(c), g = hone::allocate_weights(c);
  hone::Transformer m(c, w);
  std::vector<float> d(4, 1.f);
  BOOST_CHECK_THROW(m.backward(d.data(), nullptr, g), hone::Error);
  m.forward(hone::PackedBatch::pack({{1, 2, 3, 4}}), 1.f, false);
  BOOST_CHECK_THROW(m.backward(d.data(), d.data(), g), hone::Error);  // no entropy was computed
  m.backward(d.data(), nullptr, g);
  BOOST_CHECK_THROW(m.backward(d.data(), nullptr, g), hone::Error);  // once per forward
}

BOOST_AUTO_TEST_SUITE_END()
