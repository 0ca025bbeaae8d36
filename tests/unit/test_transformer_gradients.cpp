// The whole transformer's gradient against central finite differences on tiny random models (Llama with GQA,
// Qwen2 with q/k/v biases, Qwen3 with q/k norms and tied embeddings), through logprobs and entropy at a
// temperature != 1.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>

#include "transformer_test_util.h"

namespace {

struct GradCheckResult {
  int checked = 0;
  int failed = 0;
  double max_abs_err = 0;
  double err_sq = 0, ref_sq = 0;  // over all checked entries
  double rel_l2() const { return std::sqrt(err_sq / ref_sq); }
};

// For every parameter tensor, a few entries (first, last, and some in between) are perturbed by +-eps.
GradCheckResult check_gradients(hone::Architecture arch, bool tied) {
  const hone::ModelConfig c = test::tiny_config(arch, tied);
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 7);
  hone::Transformer model(c, w);
  const auto seqs = test::random_sequences({6, 9, 4}, c.vocab_size, 11);
  hone::PackedBatch b = hone::PackedBatch::pack(seqs);
  const float temperature = 0.8f;

  model.forward(b, temperature, true);
  const int T = b.num_tokens();
  const auto cw = test::logprob_weights(T), ew = test::entropy_weights(T);
  hone::ModelWeights g = hone::allocate_weights(c);
  model.backward(cw.data(), ew.data(), g);

  GradCheckResult r;
  const float eps = 3e-3f;
  for (const auto& [name, t] : w.named_parameters()) {
    const int64_t n = t.numel();
    const int64_t offset = t.f32() - w.flat.f32();
    for (int64_t idx : {int64_t(0), n / 3, (2 * n) / 3 + 1, n - 1}) {
      if (idx >= n) continue;
      float& p = w.flat.f32()[offset + idx];
      const float saved = p;
      p = saved + eps;
      const double lp = test::weighted_loss(model, b, temperature);
      p = saved - eps;
      const double lm = test::weighted_loss(model, b, temperature);
      p = saved;
      const double fd = (lp - lm) / (2.0 * double(eps));
      const double an = g.flat.f32()[offset + idx];
      const double err = std::fabs(fd - an);
      r.max_abs_err = std::max(r.max_abs_err, err);
      r.err_sq += err * err;
      r.ref_sq += fd * fd;
      ++r.checked;
      // The forward is fp32: the loss (|L| ~ 80) carries ~1e-6..1e-5 of rounding, which the difference quotient
      // turns into ~1e-3 of noise (measured: max |error| 0.6e-3..2.6e-3 on gradients of 0.01..0.4).
      if (err > 3e-3 + 1e-2 * std::fabs(an)) {
        ++r.failed;
        BOOST_TEST_MESSAGE(name << "[" << idx << "]: analytic " << an << " finite difference " << fd);
      }
    }
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transformer_gradients)

BOOST_AUTO_TEST_CASE(llama_gqa_untied_matches_finite_differences) {
  const auto r = check_gradients(hone::Architecture::llama, false);
  BOOST_TEST_MESSAGE("llama: " << r.checked << " entries, max |error| " << r.max_abs_err << ", relative L2 " << r.rel_l2());
  BOOST_TEST(r.checked > 40);
  BOOST_TEST(r.failed == 0);
  BOOST_TEST(r.rel_l2() < 2e-3);
}

BOOST_AUTO_TEST_CASE(qwen2_biases_match_finite_differences) {
  const auto r = check_gradients(hone::Architecture::qwen2, false);
  BOOST_TEST_MESSAGE("qwen2: " << r.checked << " entries, max |error| " << r.max_abs_err << ", relative L2 " << r.rel_l2());
  BOOST_TEST(r.checked > 50);
  BOOST_TEST(r.failed == 0);
  BOOST_TEST(r.rel_l2() < 2e-3);
}

BOOST_AUTO_TEST_CASE(qwen3_qk_norm_tied_matches_finite_differences) {
  const auto r = check_gradients(hone::Architecture::qwen3, true);
  BOOST_TEST_MESSAGE("qwen3: " << r.checked << " entries, max |error| " << r.max_abs_err << ", relative L2 " << r.rel_l2());
  BOOST_TEST(r.checked > 50);
  BOOST_TEST(r.failed == 0);
  BOOST_TEST(r.rel_l2() < 2e-3);
}

BOOST_AUTO_TEST_SUITE_END()
