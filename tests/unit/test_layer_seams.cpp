// The CPU layer body's seams. The collectives hook is where a tensor-parallel layer's partial sums must cross ranks:
// two shards of one layer (Megatron's split of heads, KV heads and feed-forward width: parallel/shard_layout.h),
// run on two threads whose hook sums their partials, give the whole layer's output, input gradient and parameter
// gradients. That proves the hook sits at the right points with the right sizes before any communicator exists.
#include <boost/test/unit_test.hpp>

#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "common/compare.h"
#include "model/layer_shape.h"
#include "model/transformer_layer.h"
#include "ops/ops.h"
#include "parallel/shard_layout.h"
#include "transformer_test_util.h"

namespace {

using hone::LayerParam;
using hone::Tensor;

// Shard `rank` of 2 of layer `layer`'s weights (or gradients), as the shard layout cuts it.
hone::LayerWeights shard(const hone::ModelConfig& c, const hone::LayerWeights& w, int layer, int rank) {
  const hone::ShardLayout L = hone::ShardLayout::of(c, 2, rank);
  hone::LayerWeights out;
  for (const hone::ParamShard& p : L.params()) {
    if (p.spec.layer != layer) continue;
    Tensor t = Tensor::empty(p.local_shape);
    hone::ShardLayout::extract(p, w[p.spec.param].f32(), t.f32());
    out[p.spec.param] = t;
  }
  return out;
}

hone::LayerWeights zeros_like(const hone::LayerWeights& w) {
  hone::LayerWeights g;
  for (int i = 0; i < hone::kNumLayerParams; ++i)
    if (w[LayerParam(i)].defined()) g[LayerParam(i)] = Tensor::zeros(w[LayerParam(i)].shape());
  return g;
}

// Two threads standing for two tensor-parallel ranks: each hook call sums both ranks' buffers (rank 0's first, so
// both get the same bits).
struct ThreadPair {
  std::barrier<> sync{2};
  float* posted[2] = {nullptr, nullptr};
};

class ThreadPairCollectives final : public hone::LayerCollectives<float> {
 public:
  ThreadPairCollectives(ThreadPair& pair, int rank) : pair_(pair), rank_(rank) {}
  void gather_sequence(const float*, float*, int64_t) override { BOOST_FAIL("no sequence parallelism here"); }
  void reduce_row_parallel_output(float* y, float* out, int64_t n) override { sum(y, out, n); }
  void reduce_column_parallel_input_grad(float* dx, float* out, int64_t n) override { sum(dx, out, n); }
  int calls = 0;

 private:
  void sum(float* x, float* out, int64_t n) {
    ++calls;
    pair_.posted[rank_] = x;
    pair_.sync.arrive_and_wait();
    std::vector<float> total(static_cast<size_t>(n), 0.f);
    for (int64_t i = 0; i < n; ++i) total[size_t(i)] = pair_.posted[0][i] + pair_.posted[1][i];
    pair_.sync.arrive_and_wait();  // nobody writes before both have read
    std::copy(total.begin(), total.end(), out);
  }
  ThreadPair& pair_;
  int rank_;
};

// One layer pass (forward, then backward of dres) with its own activations.
struct LayerRun {
  std::vector<float> act_buf, scratch_buf, out, dres;
  hone::LayerWeights grads;

  void run(const hone::LayerShape& s, const hone::LayerWeights& w, const hone::LayerBatch& b, const float* x,
           const std::vector<float>& dout, hone::LayerCollectives<float>* coll) {
    hone::LayerActivations a;
    act_buf.assign(size_t(hone::carve_layer_activations(a, nullptr, s, b.T)), 0.f);
    hone::carve_layer_activations(a, act_buf.data(), s, b.T);
    a.x_in = x;
    hone::LayerGradScratch g;
    scratch_buf.assign(size_t(hone::carve_layer_grad_scratch(g, nullptr, s, b.T)), 0.f);
    hone::carve_layer_grad_scratch(g, scratch_buf.data(), s, b.T);
    out.assign(size_t(b.T) * size_t(s.hidden), 0.f);
    hone::PackedAttention attention;
    hone::layer_forward(0, s, w, b, a, attention, coll, out.data());
    dres = dout;
    grads = zeros_like(w);
    hone::layer_backward(s, w, grads, b, a, g, attention, coll, dres.data());
  }
};

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_seams)

BOOST_AUTO_TEST_CASE(two_shards_with_the_hook_summing_equal_the_whole_layer) {
  for (auto arch : {hone::Architecture::qwen3, hone::Architecture::qwen2, hone::Architecture::llama}) {
    const hone::ModelConfig c = test::tiny_config(arch, false);  // 4 heads over 2 KV heads: one KV head a shard
    hone::ModelWeights w = hone::allocate_weights(c);
    test::randomize(w, 5);
    const hone::LayerWeights& lw = w.layers[0];

    const int T = 11;
    const std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4};
    const std::vector<int32_t> cu = {0, 6, 11};
    std::vector<float> inv_freq(size_t(c.head_dim / 2));
    hone::cpu::rope_inv_freq(inv_freq.data(), c.rope);
    const hone::LayerBatch b{positions.data(), cu.data(), T, 2, inv_freq.data()};
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> x(size_t(T * c.hidden_size)), dout(x.size());
    for (float& v : x) v = nd(rng);
    for (float& v : dout) v = nd(rng);

    LayerRun whole;
    whole.run(hone::layer_shape(c), lw, b, x.data(), dout, nullptr);

    ThreadPair pair;
    LayerRun part[2];
    hone::LayerShape shapes[2] = {hone::layer_shape(c, 2, 0), hone::layer_shape(c, 2, 1)};
    hone::LayerWeights shards[2] = {shard(c, lw, 0, 0), shard(c, lw, 0, 1)};
    ThreadPairCollectives hooks[2] = {{pair, 0}, {pair, 1}};
    std::thread t1([&] { part[1].run(shapes[1], shards[1], b, x.data(), dout, &hooks[1]); });
    part[0].run(shapes[0], shards[0], b, x.data(), dout, &hooks[0]);
    t1.join();

    for (int r = 0; r < 2; ++r) {
      BOOST_TEST(hooks[r].calls == 4);  // o_proj and down_proj forward, gate/up and q/k/v backward
      BOOST_TEST(test::rel_l2(part[r].out, whole.out) < 1e-5);
      BOOST_TEST(test::rel_l2(part[r].dres, whole.dres) < 1e-5);
      const hone::LayerWeights expect = shard(c, whole.grads, 0, r);
      for (LayerParam p : {LayerParam::q_proj, LayerParam::k_proj, LayerParam::v_proj, LayerParam::o_proj,
                           LayerParam::gate_proj, LayerParam::up_proj, LayerParam::down_proj,
                           LayerParam::input_layernorm, LayerParam::post_attention_layernorm})
        BOOST_TEST(test::rel_l2(values(part[r].grads[p]), values(expect[p])) < 1e-5, hone::layer_param_suffix(p));
      if (c.attention_bias)
        BOOST_TEST(test::rel_l2(values(part[r].grads.q_bias), values(expect.q_bias)) < 1e-5);
    }
    // q/k norm weights are replicated but each shard sees only its heads: their gradients are partial sums.
    if (c.qk_norm)
      for (LayerParam p : {LayerParam::q_norm, LayerParam::k_norm}) {
        std::vector<float> sum = values(part[0].grads[p]);
        const std::vector<float> other = values(part[1].grads[p]);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += other[i];
        BOOST_TEST(test::rel_l2(sum, values(whole.grads[p])) < 1e-5, hone::layer_param_suffix(p));
      }
  }
}

BOOST_AUTO_TEST_SUITE_END()
