// The mixture-of-experts feed-forward (model/moe_feed_forward.h) on the router's edge cases, against a plain
// per-token loop (y[t] = sum_j w[t, j] expert_{idx[t, j]}(h[t])) and its gradients against finite differences:
//   ties        a zero router: every logit equal, every token takes experts 0 and 1 (the lower ids), the other
//               experts get no token and no gradient;
//   one expert  every token routed to the same single expert (k = 1);
//   spread      random routing, with and without renormalized weights;
// and the load-balancing loss's value and gradient against transformers' formula on the same routing.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "model/moe_feed_forward.h"
#include "model/layer_shape.h"
#include "model/weights.h"
#include "ops/ops.h"

namespace {

hone::ModelConfig moe_config(int E, int k, bool norm) {
  hone::ModelConfig c;
  c.arch = hone::Architecture::qwen3_moe;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  c.max_position_embeddings = 32;
  c.rope.head_dim = 4;
  c.qk_norm = true;
  c.num_experts = E;
  c.num_experts_per_tok = k;
  c.moe_intermediate_size = 6;
  c.norm_topk_prob = norm;
  return c;
}

struct Block {
  hone::ModelConfig c;
  hone::LayerShape s;
  hone::ModelWeights w;
  std::vector<float> h;  // [T, C] the normed input
  int T;

  Block(const hone::ModelConfig& cfg, int T_, uint32_t seed) : c(cfg), s(hone::layer_shape(cfg)), T(T_) {
    w = hone::allocate_weights(c);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 0.5f);
    for (int64_t i = 0; i < w.flat.numel(); ++i) w.flat.f32()[i] = nd(rng);
    h.resize(size_t(T) * c.hidden_size);
    for (float& x : h) x = nd(rng);
  }

  // The block's output through MoeFeedForward.
  std::vector<float> forward(hone::MoeFeedForward<hone::CpuBackend>& m) const {
    hone::LayerActivations<hone::CpuBackend> a;
    a.h2 = const_cast<float*>(h.data());
    hone::LayerBatch b;
    b.T = T;
    std::vector<float> y(size_t(T) * c.hidden_size);
    m.forward(0, s, hone::layer_pointers(w.layers[0]), b, a, {}, nullptr, y.data(), y.data(), {});
    return y;
  }

  // The plain loop, from the top-k the router op chooses.
  std::vector<float> reference() const {
    const int C = c.hidden_size, E = c.num_experts, k = c.num_experts_per_tok, I = c.moe_intermediate_size;
    std::vector<float> logits(size_t(T) * E), probs(size_t(T) * E), tw(size_t(T) * k);
    std::vector<int32_t> idx(size_t(T) * k);
    hone::cpu::linear_forward(logits.data(), h.data(), w.layers[0].router.f32(), nullptr, T, C, E);
    hone::cpu::moe_topk_forward(probs.data(), idx.data(), tw.data(), logits.data(), T, E, k, c.norm_topk_prob);
    std::vector<float> y(size_t(T) * C, 0.f), g(static_cast<size_t>(I)), u(static_cast<size_t>(I)),
        a(static_cast<size_t>(I)), o(static_cast<size_t>(C));
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < k; ++j) {
        const int e = idx[size_t(t) * k + size_t(j)];
        const hone::LayerWeights& L = w.layers[0];
        hone::cpu::linear_forward(g.data(), h.data() + size_t(t) * C, L.expert_gate.f32() + int64_t(e) * I * C, nullptr, 1, C, I);
        hone::cpu::linear_forward(u.data(), h.data() + size_t(t) * C, L.expert_up.f32() + int64_t(e) * I * C, nullptr, 1, C, I);
        hone::cpu::swiglu_forward(a.data(), g.data(), u.data(), I);
        hone::cpu::linear_forward(o.data(), a.data(), L.expert_down.f32() + int64_t(e) * C * I, nullptr, 1, I, C);
        for (int i = 0; i < C; ++i) y[size_t(t) * C + size_t(i)] += tw[size_t(t) * k + size_t(j)] * o[size_t(i)];
      }
    return y;
  }
};

double loss_of(const std::vector<float>& y) {
  double L = 0;
  for (size_t i = 0; i < y.size(); ++i) L += (1.0 + 0.1 * double(i % 7)) * y[i];
  return L;
}

// Analytic gradients of L = sum c_i y_i into dh and g, then finite differences of a few entries of h and of every
// parameter tensor (the router's only when its perturbation cannot change the selection).
void check_gradients(Block& blk, bool router_fd, const char* what) {
  BOOST_TEST_CONTEXT(what) {
    hone::MoeFeedForward<hone::CpuBackend> m(blk.c);
    const std::vector<float> y = blk.forward(m);
    std::vector<float> dy(y.size());
    for (size_t i = 0; i < y.size(); ++i) dy[i] = float(1.0 + 0.1 * double(i % 7));
    std::vector<float> dh(blk.h.size(), 0.f);
    hone::ModelWeights g = hone::allocate_weights(blk.c);
    hone::LayerActivations<hone::CpuBackend> a;
    a.h2 = blk.h.data();
    hone::LayerBatch b;
    b.T = blk.T;
    hone::LayerScratch<hone::CpuBackend> scratch;
    scratch.dh = scratch.dh_local = dh.data();  // one rank: the layer's input gradient rows are all its rows
    m.backward(0, blk.s, hone::layer_pointers(blk.w.layers[0]), hone::layer_grad_pointers(g.layers[0]), b, a,
               scratch, nullptr, dy.data(), {});

    const float eps = 1e-3f;
    auto fd = [&](float& x) {
      const float saved = x;
      hone::MoeFeedForward<hone::CpuBackend> probe(blk.c);
      x = saved + eps;
      const double lp = loss_of(blk.forward(probe));
      x = saved - eps;
      const double lm = loss_of(blk.forward(probe));
      x = saved;
      return (lp - lm) / (2.0 * eps);
    };
    double worst = 0;
    for (size_t i = 0; i < blk.h.size(); i += 5) worst = std::max(worst, std::fabs(fd(blk.h[i]) - dh[i]));
    for (const auto& [name, t] : blk.w.named_parameters()) {
      if (name.find("mlp.gate.weight") != std::string::npos && !router_fd) continue;
      if (name.find("mlp.") == std::string::npos) continue;  // attention and norms: not the block's
      const int64_t off = t.f32() - blk.w.flat.f32();
      for (int64_t i : {int64_t(0), t.numel() / 2, t.numel() - 1})
        worst = std::max(worst, std::fabs(fd(blk.w.flat.f32()[off + i]) - double(g.flat.f32()[off + i])));
    }
    BOOST_TEST(worst < 2e-3, "max |analytic - finite difference| " << worst);
  }
}

double sum_abs(const hone::Tensor& t, int64_t begin, int64_t n) {
  double s = 0;
  for (int64_t i = begin; i < begin + n; ++i) s += std::fabs(t.f32()[i]);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(moe_block)

BOOST_AUTO_TEST_CASE(ties_route_to_the_lower_ids_and_idle_experts_get_nothing) {
  for (bool norm : {false, true}) {
    Block blk(moe_config(4, 2, norm), 6, 3);
    blk.w.layers[0].router.fill_zero();  // every logit 0: a four-way tie in every row
    hone::MoeFeedForward<hone::CpuBackend> m(blk.c);
    const std::vector<float> y = blk.forward(m);
    const std::vector<float> want = blk.reference();
    for (size_t i = 0; i < y.size(); ++i) BOOST_TEST(std::fabs(y[i] - want[i]) < 1e-5);
    for (int t = 0; t < blk.T; ++t) {
      BOOST_TEST(m.topk(0, {})[size_t(t) * 2] == 0);
      BOOST_TEST(m.topk(0, {})[size_t(t) * 2 + 1] == 1);
    }
    BOOST_TEST(m.expert_counts({}) == (std::vector<int32_t>{6, 6, 0, 0}), boost::test_tools::per_element());
    check_gradients(blk, /*router_fd=*/false, norm ? "ties, renormalized" : "ties");
    // Experts 2 and 3 had no token: no gradient.
    hone::ModelWeights g = hone::allocate_weights(blk.c);
    std::vector<float> dy(y.size(), 1.f), dh(blk.h.size(), 0.f);
    hone::LayerActivations<hone::CpuBackend> a;
    a.h2 = blk.h.data();
    hone::LayerBatch b;
    b.T = blk.T;
    hone::LayerScratch<hone::CpuBackend> scratch;
    scratch.dh = scratch.dh_local = dh.data();  // one rank: the layer's input gradient rows are all its rows
    m.backward(0, blk.s, hone::layer_pointers(blk.w.layers[0]), hone::layer_grad_pointers(g.layers[0]), b, a,
               scratch, nullptr, dy.data(), {});
    const int64_t per = int64_t(blk.c.moe_intermediate_size) * blk.c.hidden_size;
    BOOST_TEST(sum_abs(g.layers[0].expert_gate, 2 * per, 2 * per) == 0.0);
    BOOST_TEST(sum_abs(g.layers[0].expert_down, 2 * per, 2 * per) == 0.0);
    BOOST_TEST(sum_abs(g.layers[0].expert_gate, 0, 2 * per) > 0.0);
  }
}

BOOST_AUTO_TEST_CASE(every_token_to_one_expert) {
  Block blk(moe_config(4, 1, false), 7, 4);
  for (float& x : blk.h) x = std::fabs(x) + 0.1f;  // positive rows: expert 2's logit 3 sum(h) wins by a margin
  hone::Tensor& r = blk.w.layers[0].router;
  r.fill_zero();
  for (int i = 0; i < blk.c.hidden_size; ++i) r.f32()[2 * blk.c.hidden_size + i] = 3.f;
  hone::MoeFeedForward<hone::CpuBackend> m(blk.c);
  const std::vector<float> y = blk.forward(m), want = blk.reference();
  for (size_t i = 0; i < y.size(); ++i) BOOST_TEST(std::fabs(y[i] - want[i]) < 1e-5);
  BOOST_TEST(m.expert_counts({}) == (std::vector<int32_t>{0, 0, 7, 0}), boost::test_tools::per_element());
  check_gradients(blk, /*router_fd=*/true, "one expert");
}

BOOST_AUTO_TEST_CASE(spread_routing_matches_the_plain_loop_and_finite_differences) {
  for (bool norm : {false, true}) {
    Block blk(moe_config(6, 3, norm), 9, 5);
    hone::MoeFeedForward<hone::CpuBackend> m(blk.c);
    const std::vector<float> y = blk.forward(m), want = blk.reference();
    for (size_t i = 0; i < y.size(); ++i) BOOST_TEST(std::fabs(y[i] - want[i]) < 1e-5);
    // Random routing can sit near a tie: the router's finite differences only where no row is within 1e-2.
    check_gradients(blk, /*router_fd=*/false, norm ? "spread, renormalized" : "spread");
  }
}

BOOST_AUTO_TEST_CASE(load_balancing_loss_is_transformers_formula_and_its_gradient) {
  Block blk(moe_config(4, 2, true), 8, 6);
  hone::MoeFeedForward<hone::CpuBackend> m(blk.c);
  blk.forward(m);
  // transformers: E sum_e (assignments of e / rows) (mean probability of e).
  const int C = blk.c.hidden_size, E = 4, k = 2, T = blk.T;
  std::vector<float> logits(size_t(T) * E), probs(size_t(T) * E), tw(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::linear_forward(logits.data(), blk.h.data(), blk.w.layers[0].router.f32(), nullptr, T, C, E);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), tw.data(), logits.data(), T, E, k, true);
  double aux = 0;
  for (int e = 0; e < E; ++e) {
    double f = 0, P = 0;
    for (int a = 0; a < T * k; ++a) f += idx[size_t(a)] == e ? 1 : 0;
    for (int t = 0; t < T; ++t) P += probs[size_t(t) * E + size_t(e)];
    aux += (f / T) * (P / T);
  }
  aux *= E;
  BOOST_TEST(std::fabs(m.aux_loss({}) - aux) < 1e-6);
  // Its gradient alone (dy = 0, weight 1) against finite differences of the router's entries and of h.
  std::vector<float> dy(size_t(T) * C, 0.f), dh(blk.h.size(), 0.f);
  hone::ModelWeights g = hone::allocate_weights(blk.c);
  hone::LayerActivations<hone::CpuBackend> a;
  a.h2 = blk.h.data();
  hone::LayerBatch b;
  b.T = T;
  b.routing.aux_loss_weight = 1.0;
  hone::LayerScratch<hone::CpuBackend> scratch;
  scratch.dh = scratch.dh_local = dh.data();  // one rank: the layer's input gradient rows are all its rows
  m.backward(0, blk.s, hone::layer_pointers(blk.w.layers[0]), hone::layer_grad_pointers(g.layers[0]), b, a,
               scratch, nullptr, dy.data(), {});
  const float eps = 1e-3f;
  double worst = 0;
  auto fd = [&](float& x) {
    const float saved = x;
    hone::MoeFeedForward<hone::CpuBackend> probe(blk.c);
    x = saved + eps;
    blk.forward(probe);
    const double lp = probe.aux_loss({});
    x = saved - eps;
    blk.forward(probe);
    const double lm = probe.aux_loss({});
    x = saved;
    return (lp - lm) / (2.0 * eps);
  };
  float* r = blk.w.layers[0].router.f32();
  for (int i = 0; i < E * C; i += 3) worst = std::max(worst, std::fabs(fd(r[i]) - double(g.layers[0].router.f32()[i])));
  for (size_t i = 0; i < blk.h.size(); i += 7) worst = std::max(worst, std::fabs(fd(blk.h[i]) - double(dh[i])));
  BOOST_TEST(worst < 1e-3, "max |analytic - finite difference| " << worst);
}

BOOST_AUTO_TEST_SUITE_END()
