// The layer body's seams (on the CPU backend). The collectives hook is where a tensor-parallel layer's partial sums must cross ranks:
// two shards of one layer (Megatron's split of heads, KV heads and feed-forward width: parallel/shard_layout.h),
// run on two threads whose hook sums their partials, give the whole layer's output, input gradient and parameter
// gradients. That proves the hook sits at the right points with the right sizes before any communicator exists.
// The feed-forward seam is what the body runs between the post-attention norm and the last residual add: a
// feed-forward plugged in there is called with the layer's index and nothing of the dense MLP runs beside it, and
// the dense one (DenseFeedForward) computes down(silu(gate(h2)) * up(h2)) with the very ops of the MLP.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "common/compare.h"
#include "backend/cpu_backend.h"
#include "model/layer_shape.h"
#include "model/transformer_layer.h"
#include "ops/ops.h"
#include "parallel/shard_layout.h"
#include "transformer_test_util.h"

namespace {

using hone::CpuBackend;
using hone::LayerParam;
using hone::Tensor;
using Acts = hone::LayerActivations<CpuBackend>;
using Scratch = hone::LayerScratch<CpuBackend>;
using FeedForward = hone::LayerFeedForward<CpuBackend>;
using W = hone::LayerWeightPtrs<CpuBackend>;

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

// One layer pass (forward, then backward of dres) with its own activations; the dense feed-forward unless given.
struct LayerRun {
  std::vector<float> act_buf, scratch_buf, out, dres;
  Acts a;
  hone::LayerWeights grads;

  void run(const hone::LayerShape& s, const hone::LayerWeights& lw, const hone::LayerBatch& b, const float* x,
           const std::vector<float>& dout, hone::LayerCollectives<float>* coll, FeedForward* feed_forward = nullptr,
           int layer = 0) {
    const size_t act = hone::carve_layer_activations(a, nullptr, s, b.T);
    act_buf.assign(act / sizeof(float), 0.f);
    hone::carve_layer_activations(a, reinterpret_cast<char*>(act_buf.data()), s, b.T);
    a.x_in = x;
    Scratch g;
    const size_t fwd = hone::carve_layer_forward_scratch(g, nullptr, s, b.T);
    const size_t bwd = hone::carve_layer_backward_scratch(g, nullptr, s, b.T);
    scratch_buf.assign((fwd + bwd) / sizeof(float), 0.f);
    char* base = reinterpret_cast<char*>(scratch_buf.data());
    hone::carve_layer_forward_scratch(g, base, s, b.T);
    hone::carve_layer_backward_scratch(g, base + fwd, s, b.T);
    out.assign(size_t(b.T) * size_t(s.hidden), 0.f);
    hone::PackedAttention<CpuBackend> attention;
    hone::DenseFeedForward<CpuBackend> dense;
    FeedForward& ffn = feed_forward ? *feed_forward : dense;
    const W w = hone::layer_pointers(lw);
    hone::layer_forward<CpuBackend>(layer, s, w, b, a, g, attention, ffn, coll, out.data(), {});
    dres = dout;
    grads = zeros_like(lw);
    hone::layer_backward<CpuBackend>(layer, s, w, hone::layer_grad_pointers(grads), b, a, g, attention, ffn, coll,
                                     dres.data(), {});
  }
};

// A feed-forward that records its calls and runs the dense one (or, with `silent`, contributes nothing: a zero
// branch output and no gradient into h2).
class RecordingFeedForward final : public FeedForward {
 public:
  explicit RecordingFeedForward(bool silent) : silent_(silent) {}
  void forward(int layer, const hone::LayerShape& s, const W& w, const hone::LayerBatch& b, const Acts& a,
               const Scratch& scratch, hone::LayerCollectives<float>* coll, float* y, float* out,
               const CpuBackend::Exec& x) override {
    forward_layers.push_back(layer);
    if (silent_) std::fill_n(out, size_t(b.T) * size_t(s.hidden), 0.f);
    else dense_.forward(layer, s, w, b, a, scratch, coll, y, out, x);
  }
  void backward(int layer, const hone::LayerShape& s, const W& w, const hone::LayerGradPtrs& g,
                const hone::LayerBatch& b, const Acts& a, const Scratch& scratch, hone::LayerCollectives<float>* coll,
                float* dres, const CpuBackend::Exec& x) override {
    backward_layers.push_back(layer);
    if (silent_) std::fill_n(scratch.dh_local, size_t(b.T) * size_t(s.hidden), 0.f);
    else dense_.backward(layer, s, w, g, b, a, scratch, coll, dres, x);
  }
  std::vector<int> forward_layers, backward_layers;

 private:
  bool silent_;
  hone::DenseFeedForward<CpuBackend> dense_;
};

// A layer's weights, packed batch, input and output gradient for the tests below.
struct LayerCase {
  hone::ModelConfig c;
  hone::ModelWeights w;
  std::vector<int32_t> positions = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4};
  std::vector<int32_t> cu = {0, 6, 11};
  std::vector<float> inv_freq, x, dout;
  hone::LayerBatch b;

  explicit LayerCase(hone::Architecture arch) : c(test::tiny_config(arch, false)), w(hone::allocate_weights(c)) {
    test::randomize(w, 5);
    const int T = int(positions.size());
    inv_freq.resize(size_t(c.head_dim / 2));
    hone::cpu::rope_inv_freq(inv_freq.data(), c.rope);
    b = hone::LayerBatch();
    b.positions = positions.data(), b.cu_seqlens = cu.data(), b.T = T, b.S = 2, b.max_seqlen = 6;
    b.inv_freq = inv_freq.data();
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.f, 1.f);
    x.resize(size_t(T * c.hidden_size));
    dout.resize(x.size());
    for (float& v : x) v = nd(rng);
    for (float& v : dout) v = nd(rng);
  }
};

std::vector<float> values(const Tensor& t) { return std::vector<float>(t.f32(), t.f32() + t.numel()); }

}  // namespace

BOOST_AUTO_TEST_SUITE(layer_seams)

BOOST_AUTO_TEST_CASE(two_shards_with_the_hook_summing_equal_the_whole_layer) {
  for (auto arch : {hone::Architecture::qwen3, hone::Architecture::qwen2, hone::Architecture::llama}) {
    const LayerCase lc(arch);  // 4 heads over 2 KV heads: one KV head a shard
    const hone::ModelConfig& c = lc.c;
    const hone::LayerWeights& lw = lc.w.layers[0];
    const hone::LayerBatch& b = lc.b;
    const std::vector<float>& x = lc.x;
    const std::vector<float>& dout = lc.dout;

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

BOOST_AUTO_TEST_CASE(the_body_runs_the_feed_forward_it_is_given) {
  for (auto arch : {hone::Architecture::qwen3, hone::Architecture::llama}) {
    const LayerCase lc(arch);
    const hone::LayerShape s = hone::layer_shape(lc.c);
    const hone::LayerWeights& lw = lc.w.layers[1];
    LayerRun dense;
    dense.run(s, lw, lc.b, lc.x.data(), lc.dout, nullptr, nullptr, 1);

    // Passed through: called once each way with the layer's index, the same bits as the dense one alone.
    RecordingFeedForward passing(false);
    LayerRun through;
    through.run(s, lw, lc.b, lc.x.data(), lc.dout, nullptr, &passing, 1);
    BOOST_TEST(passing.forward_layers == std::vector<int>{1});
    BOOST_TEST(passing.backward_layers == std::vector<int>{1});
    BOOST_TEST(through.out == dense.out);
    BOOST_TEST(through.dres == dense.dres);
    for (int i = 0; i < hone::kNumLayerParams; ++i)
      if (lw[LayerParam(i)].defined())
        BOOST_TEST(values(through.grads[LayerParam(i)]) == values(dense.grads[LayerParam(i)]),
                   hone::layer_param_suffix(LayerParam(i)));

    // The dense one: the layer's output is x_mid + down(silu(gate(h2)) * up(h2)), op for op.
    const int T = lc.b.T, C = s.hidden, I = s.intermediate;
    std::vector<float> gate(size_t(T * I)), up(gate.size()), act(gate.size()), want(size_t(T * C));
    hone::cpu::linear_forward(gate.data(), dense.a.h2, lw.gate_proj.f32(), nullptr, T, C, I);
    hone::cpu::linear_forward(up.data(), dense.a.h2, lw.up_proj.f32(), nullptr, T, C, I);
    hone::cpu::swiglu_forward(act.data(), gate.data(), up.data(), int64_t(T) * I);
    hone::cpu::linear_forward(want.data(), act.data(), lw.down_proj.f32(), nullptr, T, I, C);
    hone::cpu::add_forward(want.data(), want.data(), dense.a.x_mid, int64_t(T) * C);
    BOOST_TEST(dense.out == want);

    // A silent one: the output is the residual after attention, and the MLP's weights get no gradient.
    RecordingFeedForward silent(true);
    LayerRun without;
    without.run(s, lw, lc.b, lc.x.data(), lc.dout, nullptr, &silent, 1);
    BOOST_TEST(silent.forward_layers == std::vector<int>{1});
    BOOST_TEST(silent.backward_layers == std::vector<int>{1});
    BOOST_TEST(without.out == std::vector<float>(without.a.x_mid, without.a.x_mid + int64_t(T) * C));
    for (LayerParam p : {LayerParam::gate_proj, LayerParam::up_proj, LayerParam::down_proj,
                         LayerParam::post_attention_layernorm})
      BOOST_TEST(values(without.grads[p]) == std::vector<float>(size_t(without.grads[p].numel()), 0.f),
                 hone::layer_param_suffix(p));
    BOOST_TEST(test::rel_l2(without.dres, dense.dres) > 1e-3);  // the branch's gradient is missing
  }
}

BOOST_AUTO_TEST_SUITE_END()
