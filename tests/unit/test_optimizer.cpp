// AdamW against a hand-worked example, its weight-decay groups, and global-norm gradient clipping.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "model/weights.h"
#include "train/adamw.h"
#include "train/grad_clip.h"
#include "transformer_test_util.h"

BOOST_AUTO_TEST_SUITE(optimizer)

// Three parameters: two decayed, one not. lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.1.
// Step 1: bias correction makes m_hat = g and v_hat = g^2, so the Adam direction is sign(g):
//   p0 = 1 - 0.1 (1 + 0.1 * 1) = 0.89,  p1 = -2 - 0.1 (-1 + 0.1 * -2) = -1.88,  p2 = 0.5 - 0.1 * 1 = 0.4.
// Step 2 (g = 0.1, 0.3, -0.5): m = (0.055, -0.06, 0.13), v = (2.5975e-4, 1.089e-3, 4.246e-3); the values below
// follow from p -= 0.1 (m/0.19 / (sqrt(v/0.001999) + 1e-8) + wd p), evaluated in double.
BOOST_AUTO_TEST_CASE(adamw_matches_hand_computed_steps) {
  hone::AdamWConfig cfg;
  cfg.beta1 = 0.9f;
  cfg.beta2 = 0.999f;
  cfg.eps = 1e-8f;
  cfg.weight_decay = 0.1f;
  hone::AdamW<hone::CpuBackend> opt(std::vector<hone::ParamSegment>{{0, 2, true}, {2, 1, false}}, 3, cfg);
  std::vector<float> p{1.f, -2.f, 0.5f};
  std::vector<float> g1{0.5f, -1.f, 2.f}, g2{0.1f, 0.3f, -0.5f};
  opt.step(p.data(), g1.data(), 0.1f);
  BOOST_TEST(opt.step_count() == 1);
  BOOST_TEST(p[0] == 0.89f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(p[1] == -1.88f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(p[2] == 0.4f, boost::test_tools::tolerance(1e-6f));
  opt.step(p.data(), g2.data(), 0.1f);
  BOOST_TEST(opt.step_count() == 2);
  BOOST_TEST(opt.exp_avg()[0] == 0.055f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(opt.exp_avg_sq()[2] == 4.246e-3f, boost::test_tools::tolerance(1e-4f));
  BOOST_TEST(p[0] == 0.8007959f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(p[1] == -1.8184151f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(p[2] == 0.3530532f, boost::test_tools::tolerance(1e-5f));
}

// Megatron's default: matrices decay, 1-D parameters (norm weights, biases) do not.
BOOST_AUTO_TEST_CASE(adamw_skips_decay_of_1d_parameters) {
  const auto c = test::tiny_config(hone::Architecture::qwen2, false);
  hone::ModelWeights w = hone::allocate_weights(c), g = hone::allocate_weights(c);
  test::randomize(w, 2);
  hone::ModelWeights before = hone::allocate_weights(c);
  std::copy(w.flat.f32(), w.flat.f32() + w.flat.numel(), before.flat.f32());
  hone::AdamWConfig cfg;
  cfg.weight_decay = 0.5f;
  hone::AdamW<hone::CpuBackend> opt(w, cfg);
  opt.step(w.flat.f32(), g.flat.f32(), 0.1f);  // zero gradient: only weight decay moves parameters
  const auto names_after = w.named_parameters(), names_before = before.named_parameters();
  int decayed = 0, kept = 0;
  for (size_t i = 0; i < names_after.size(); ++i) {
    const auto& [name, t] = names_after[i];
    const float* b = names_before[i].second.f32();
    const float factor = t.ndim() >= 2 ? 1.f - 0.1f * 0.5f : 1.f;
    bool ok = true;
    for (int64_t j = 0; j < t.numel(); ++j) ok = ok && std::fabs(t.f32()[j] - factor * b[j]) <= 1e-6f;
    BOOST_TEST(ok, name);
    (t.ndim() >= 2 ? decayed : kept)++;
  }
  BOOST_TEST(decayed > 0);
  BOOST_TEST(kept > 0);  // biases and norms exist in this model
  cfg.decay_1d_params = true;
  const auto all = hone::weight_decay_segments(w, true);
  BOOST_TEST(all.size() == 1u);  // one contiguous decayed run
  BOOST_TEST(all[0].size == w.flat.numel());
}

BOOST_AUTO_TEST_CASE(clipping_scales_to_max_norm_and_returns_the_old_norm) {
  std::vector<float> g{3.f, 4.f};
  BOOST_TEST(hone::clip_grad_norm(g.data(), 2, 1.0) == 5.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(g[0] == 0.6f, boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(g[1] == 0.8f, boost::test_tools::tolerance(1e-5f));
  std::vector<float> h{3.f, 4.f};
  BOOST_TEST(hone::clip_grad_norm(h.data(), 2, 10.0) == 5.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST((h[0] == 3.f && h[1] == 4.f));  // under the limit: untouched
  BOOST_TEST(hone::clip_grad_norm(h.data(), 2, 0.0) == 5.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST((h[0] == 3.f && h[1] == 4.f));  // max_norm 0 disables clipping
  BOOST_TEST(hone::clip_coefficient(10.0, 2.0) == 0.2f, boost::test_tools::tolerance(1e-5f));
}

BOOST_AUTO_TEST_SUITE_END()
