// A mixture of experts' routing as an argument of the pass (MoeRouting in model/transformer_layer.h): replayed
// experts, the routing record and the load-balancing weight belong to one forward and its backward, so that a layer
// recomputed in backward routes as its forward did and writes no record, whatever the recompute setting.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "model/moe_feed_forward.h"
#include "model/transformer.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(moe_routing)

namespace {

ModelConfig moe_model() { return test::tiny_moe_config(/*norm_topk_prob=*/true); }

struct Pass {
  std::vector<float> logprobs;
  std::vector<int32_t> record;  // what the forward recorded, read after the backward
  ModelWeights grads;
};

// One forward and backward of batch at recompute r with routing replayed from forced (empty: none), the record
// poisoned before the pass, and aux_weight on the load-balancing loss.
Pass run(const ModelConfig& c, const ModelWeights& w, const PackedBatch& batch, Recompute r,
         const std::vector<int32_t>& forced, double aux_weight) {
  Transformer m(c, w);
  m.set_recompute(r);
  const int T = batch.num_tokens(), width = c.num_moe_layers() * c.num_experts_per_tok;
  Pass p;
  p.record.assign(size_t(T) * size_t(width), -7);
  MoeRouting routing;
  routing.forced = forced.empty() ? nullptr : forced.data();
  routing.record = p.record.data();
  routing.aux_loss_weight = aux_weight;
  m.forward(batch, 0.9f, false, true, nullptr, routing);
  p.logprobs.assign(m.logprobs(), m.logprobs() + T);
  const std::vector<int32_t> recorded = p.record;
  std::fill(p.record.begin(), p.record.end(), -7);  // the backward must not write it
  p.grads = allocate_weights(c);
  const std::vector<float> d = test::logprob_weights(T);
  m.backward(d.data(), nullptr, p.grads);
  BOOST_TEST((p.record == std::vector<int32_t>(p.record.size(), -7)), "the backward wrote the routing record");
  p.record = recorded;
  return p;
}

double max_abs_diff(const ModelWeights& a, const ModelWeights& b) {
  double d = 0;
  for (int64_t i = 0; i < a.flat.numel(); ++i) d = std::max(d, double(std::fabs(a.flat.f32()[i] - b.flat.f32()[i])));
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(replayed_routing_holds_in_recomputed_layers) {
  const ModelConfig c = moe_model();
  ModelWeights w = allocate_weights(c);
  test::randomize(w, 41);
  const PackedBatch batch = PackedBatch::pack(test::random_sequences({9, 6, 11}, c.vocab_size, 3));
  const int T = batch.num_tokens(), S = c.num_moe_layers(), k = c.num_experts_per_tok, E = c.num_experts;

  const Pass own = run(c, w, batch, Recompute::none, {}, 0.05);
  // Every row's experts replaced by others than its own (the next two expert ids after its first), except row 0,
  // which carries -1 and keeps its own top-k.
  std::vector<int32_t> forced(size_t(T) * S * k);
  int64_t moved = 0;
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < S; ++i) {
      const int32_t* mine = own.record.data() + (int64_t(t) * S + i) * k;
      int32_t* f = forced.data() + (int64_t(t) * S + i) * k;
      for (int j = 0; j < k; ++j) f[j] = t == 0 ? -1 : (mine[0] + 1 + j) % E;
      moved += t != 0 && !(f[0] == mine[0] || f[0] == mine[1]) ? 1 : 0;
    }
  BOOST_TEST_REQUIRE(moved > 0);

  const Pass plain = run(c, w, batch, Recompute::none, forced, 0.05);
  // The replayed experts are the ones recorded (row 0 its own).
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < S * k; ++i) {
      const size_t at = size_t(t) * size_t(S * k) + size_t(i);
      BOOST_TEST_INFO("row " << t << " entry " << i);
      BOOST_TEST(plain.record[at] == (t == 0 ? own.record[at] : forced[at]));
    }
  // Replay changes the gradients (else the checks below could not fail)...
  BOOST_TEST(max_abs_diff(plain.grads, own.grads) > 1e-3);
  // ... and every recompute setting gives the gradients of the pass that kept its activations.
  for (Recompute r : {Recompute::full, Recompute::selective}) {
    const Pass again = run(c, w, batch, r, forced, 0.05);
    BOOST_TEST_INFO("recompute " << int(r));
    BOOST_TEST(again.logprobs == plain.logprobs);
    BOOST_TEST(again.record == plain.record);
    BOOST_TEST(max_abs_diff(again.grads, plain.grads) <= 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(the_load_balancing_weight_is_the_pass_s) {
  const ModelConfig c = moe_model();
  ModelWeights w = allocate_weights(c);
  test::randomize(w, 43);
  const PackedBatch batch = PackedBatch::pack(test::random_sequences({8, 12}, c.vocab_size, 4));
  // The loss is linear in the weight: g(0.3) - g(0) = 0.3 (g(1) - g(0)), under full recompute too.
  for (Recompute r : {Recompute::none, Recompute::full}) {
    const Pass g0 = run(c, w, batch, r, {}, 0.0), g1 = run(c, w, batch, r, {}, 1.0), g3 = run(c, w, batch, r, {}, 0.3);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < w.flat.numel(); ++i) {
      const double a = g3.grads.flat.f32()[i] - g0.grads.flat.f32()[i];
      const double b = 0.3 * (g1.grads.flat.f32()[i] - g0.grads.flat.f32()[i]);
      worst = std::max(worst, std::fabs(a - b));
      scale = std::max(scale, std::fabs(b));
    }
    BOOST_TEST_INFO("recompute " << int(r));
    BOOST_TEST(scale > 1e-4);  // the aux gradient is there
    BOOST_TEST(worst <= 1e-5 + 1e-3 * scale);
  }
}

BOOST_AUTO_TEST_SUITE_END()
