// ShardLayout: every rank's slices put back together give the whole model; shapes agree with LayerShape; KV heads
// replicated when tp exceeds them; the padded vocabulary's extra rows are zero and dropped again.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "model/layer_shape.h"
#include "model/weights.h"
#include "parallel/shard_layout.h"
#include "transformer_test_util.h"

namespace {

// Whole weights -> every rank's flat shard -> whole again.
std::vector<float> round_trip(const hone::ModelConfig& c, const hone::ModelWeights& w, int tp) {
  std::vector<float> back(size_t(w.flat.numel()), -1.f);
  hone::ModelWeights out = hone::allocate_weights(c);
  for (int r = 0; r < tp; ++r) {
    const hone::ShardLayout L = hone::ShardLayout::of(c, tp, r);
    std::vector<float> local(size_t(L.num_local_params()));
    for (const hone::ParamShard& p : L.params())
      hone::ShardLayout::extract(p, w.param(p.spec).f32(), local.data() + p.offset);
    for (const hone::ParamShard& p : L.params())
      hone::ShardLayout::insert(p, local.data() + p.offset, out.param(p.spec).f32());
  }
  return std::vector<float>(out.flat.f32(), out.flat.f32() + out.flat.numel());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shard_layout)

BOOST_AUTO_TEST_CASE(one_rank_holds_everything_whole) {
  const hone::ModelConfig c = test::tiny_config(hone::Architecture::qwen2, false);
  const hone::ShardLayout L = hone::ShardLayout::of(c, 1, 0);
  BOOST_TEST(L.num_local_params() == c.num_parameters());
  for (const hone::ParamShard& p : L.params()) {
    BOOST_TEST(p.local_shape == p.spec.shape, p.spec.name);
    BOOST_TEST(p.slice.valid_count() == (p.slice.dim < 0 ? p.spec.numel() : p.spec.shape[size_t(p.slice.dim)]));
  }
}

BOOST_AUTO_TEST_CASE(slices_of_every_rank_rebuild_the_whole_model) {
  for (auto arch : {hone::Architecture::qwen3, hone::Architecture::qwen2, hone::Architecture::llama})
    for (bool tied : {false, true})
      for (int tp : {2, 4}) {
        hone::ModelConfig c = test::tiny_config(arch, tied);  // 4 heads over 2 KV heads, I 24
        c.vocab_size = 41;                                    // not a multiple of tp: padded
        hone::ModelWeights w = hone::allocate_weights(c);
        test::randomize(w, 9);
        const std::vector<float> whole(w.flat.f32(), w.flat.f32() + w.flat.numel());
        BOOST_TEST(round_trip(c, w, tp) == whole);
        for (int r = 0; r < tp; ++r) {
          const hone::ShardLayout L = hone::ShardLayout::of(c, tp, r);
          const hone::LayerShape s = hone::layer_shape(c, tp, r);
          const hone::ParamShard& q = L.find("model.layers.1.self_attn.q_proj.weight");
          BOOST_TEST((q.local_shape == std::vector<int64_t>{s.q_dim(), c.hidden_size}));
          const hone::ParamShard& down = L.find("model.layers.0.mlp.down_proj.weight");
          BOOST_TEST((down.local_shape == std::vector<int64_t>{c.hidden_size, s.intermediate}));
          const hone::ParamShard& emb = L.find("model.embed_tokens.weight");
          BOOST_TEST(emb.local_shape[0] * tp >= c.vocab_size);
          BOOST_TEST(emb.slice.begin == int64_t(r) * emb.local_shape[0]);
        }
      }
}

BOOST_AUTO_TEST_CASE(kv_heads_are_replicated_when_tp_exceeds_them) {
  const hone::ModelConfig c = test::tiny_config(hone::Architecture::llama, false);  // 2 KV heads of dim 8
  for (int r = 0; r < 4; ++r) {
    const hone::ShardLayout L = hone::ShardLayout::of(c, 4, r);
    const hone::ParamShard& k = L.find("model.layers.0.self_attn.k_proj.weight");
    BOOST_TEST(k.local_shape[0] == c.head_dim);
    BOOST_TEST(k.slice.begin == int64_t(r / 2) * c.head_dim);  // ranks 0, 1 read head 0; ranks 2, 3 head 1
    const hone::ParamShard& q = L.find("model.layers.0.self_attn.q_proj.weight");
    // Query head r (one per rank) belongs to KV head r / 2: the replicated head is the one its queries read.
    BOOST_TEST(q.slice.begin / c.head_dim / (c.num_attention_heads / c.num_key_value_heads) ==
               k.slice.begin / c.head_dim);
  }
}

BOOST_AUTO_TEST_CASE(padded_vocabulary_rows_are_zero) {
  hone::ModelConfig c = test::tiny_config(hone::Architecture::qwen3, false);
  c.vocab_size = 41;
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 4);
  const hone::ShardLayout L = hone::ShardLayout::of(c, 2, 1);  // rows 21..41 of 42: row 41 is padding
  const hone::ParamShard& head = L.find("lm_head.weight");
  BOOST_TEST(head.slice.valid_count() == 20);
  std::vector<float> local(size_t(head.local_numel()), 7.f);
  hone::ShardLayout::extract(head, w.lm_head.f32(), local.data());
  for (int64_t i = 20 * c.hidden_size; i < 21 * c.hidden_size; ++i) BOOST_TEST(local[size_t(i)] == 0.f);
  BOOST_TEST(local[0] == w.lm_head.f32()[21 * c.hidden_size]);
}

// The shard's ParamLayout: at tp = 1 the whole model's; at tp = 2 every offset is the shard's, tied or not.
BOOST_AUTO_TEST_CASE(param_layout_of_a_shard) {
  for (bool tied : {true, false}) {
    const hone::ModelConfig c = test::tiny_config(hone::Architecture::qwen2, tied);
    const hone::ParamLayout whole = hone::ParamLayout::of(c), one = hone::ShardLayout::of(c, 1, 0).param_layout();
    BOOST_TEST(one.num_params == whole.num_params);
    BOOST_TEST(one.embed_tokens == whole.embed_tokens);
    BOOST_TEST(one.lm_head == whole.lm_head);
    BOOST_TEST(one.norm == whole.norm);
    BOOST_REQUIRE_EQUAL(one.layers.size(), whole.layers.size());
    for (size_t l = 0; l < whole.layers.size(); ++l)
      for (int i = 0; i < hone::kNumLayerParams; ++i)
        BOOST_TEST(one.layers[l][hone::LayerParam(i)] == whole.layers[l][hone::LayerParam(i)]);
    const hone::ShardLayout L = hone::ShardLayout::of(c, 2, 1);
    const hone::ParamLayout two = L.param_layout();
    BOOST_TEST(two.num_params == L.num_local_params());
    BOOST_TEST(two.layers[1][hone::LayerParam::o_proj] == L.find("model.layers.1.self_attn.o_proj.weight").offset);
    BOOST_TEST(two.lm_head == (tied ? two.embed_tokens : L.find("lm_head.weight").offset));
  }
}

BOOST_AUTO_TEST_SUITE_END()
