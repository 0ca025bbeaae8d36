// The parameter table and LayerShape: the table's count against the closed-form count of each family, the flat
// layout against allocate_weights' views, splits by kind, and LayerShape's tensor-parallel split with its errors.
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "model/weights.h"
#include "runtime/error.h"

namespace {

hone::ModelConfig config(hone::Architecture arch, bool tied) {
  hone::ModelConfig c;
  c.arch = arch;
  c.vocab_size = 101;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == hone::Architecture::qwen2;
  c.qk_norm = arch == hone::Architecture::qwen3;
  c.rope.head_dim = c.head_dim;
  return c;
}

// The count written out by hand per family, independent of the table.
int64_t closed_form_count(const hone::ModelConfig& c) {
  const int64_t C = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  int64_t layer = 2 * C + C * q + 2 * C * kv + q * C + 3 * C * I;
  if (c.attention_bias) layer += q + 2 * kv;
  if (c.qk_norm) layer += 2 * D;
  return V * C + c.num_hidden_layers * layer + C + (c.tie_word_embeddings ? 0 : V * C);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(param_table)

BOOST_AUTO_TEST_CASE(count_names_and_flat_layout_per_family) {
  for (auto arch : {hone::Architecture::llama, hone::Architecture::qwen2, hone::Architecture::qwen3}) {
    for (bool tied : {false, true}) {
      const hone::ModelConfig c = config(arch, tied);
      const auto table = hone::param_table(c);
      BOOST_TEST(hone::count_parameters(c) == closed_form_count(c));
      BOOST_TEST(c.num_parameters() == closed_form_count(c));
      std::set<std::string> names;
      for (const auto& s : table) names.insert(s.name);
      BOOST_TEST(names.size() == table.size());  // every name once
      BOOST_TEST(names.count("lm_head.weight") == size_t(tied ? 0 : 1));
      BOOST_TEST(names.count("model.layers.2.self_attn.q_proj.bias") == size_t(c.attention_bias ? 1 : 0));
      BOOST_TEST(names.count("model.layers.0.self_attn.k_norm.weight") == size_t(c.qk_norm ? 1 : 0));

      // The flat layout's offsets are where allocate_weights put each view.
      const hone::ModelWeights w = hone::allocate_weights(c);
      const hone::ParamLayout layout = hone::ParamLayout::of(c);
      BOOST_TEST(layout.num_params == w.flat.numel());
      auto offset = [&](const hone::Tensor& t) { return int64_t(t.f32() - w.flat.f32()); };
      BOOST_TEST(layout.embed_tokens == offset(w.embed_tokens));
      BOOST_TEST(layout.norm == offset(w.norm));
      BOOST_TEST(layout.lm_head == offset(w.lm_head));
      for (int l = 0; l < c.num_hidden_layers; ++l)
        for (int i = 0; i < hone::kNumLayerParams; ++i) {
          const auto p = hone::LayerParam(i);
          const hone::Tensor& t = w.layers[size_t(l)][p];
          BOOST_TEST(layout.layers[size_t(l)][p] == (t.defined() ? offset(t) : -1));
          if (t.defined()) BOOST_TEST(t.shape() == hone::layer_param_shape(c, p));
        }
      BOOST_TEST(layout.layer_begin(1) == layout.layers[1][hone::LayerParam::q_proj]);
    }
  }
}

BOOST_AUTO_TEST_CASE(splits_follow_megatron) {
  const hone::ModelConfig c = config(hone::Architecture::qwen2, false);
  for (const auto& s : hone::param_table(c)) {
    const std::string& n = s.name;
    auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
    if (has("q_proj") || has("k_proj") || has("v_proj") || has("gate_proj") || has("up_proj"))
      BOOST_TEST((s.split == hone::Split::column && s.split_dim() == 0), n);
    else if (has("o_proj") || has("down_proj"))
      BOOST_TEST((s.split == hone::Split::row && s.split_dim() == 1), n);
    else if (has("embed_tokens") || has("lm_head"))
      BOOST_TEST((s.split == hone::Split::vocab && s.split_dim() == 0), n);
    else
      BOOST_TEST((s.split == hone::Split::replicated && s.split_dim() == -1 && s.init == hone::ParamInit::ones), n);
    if (has(".bias")) BOOST_TEST((s.init == hone::ParamInit::zeros), n);
  }
}

BOOST_AUTO_TEST_CASE(layer_shape_splits_heads_width_and_vocabulary) {
  const hone::ModelConfig c = config(hone::Architecture::qwen3, true);  // 8 heads, 2 KV heads, I 48, V 101
  const hone::LayerShape one = hone::layer_shape(c);
  BOOST_TEST(one.heads == 8);
  BOOST_TEST(one.kv_heads == 2);
  BOOST_TEST(one.intermediate == 48);
  BOOST_TEST(one.vocab == 101);
  BOOST_TEST(one.q_dim() == c.q_dim());
  BOOST_TEST(one.kv_dim() == c.kv_dim());
  BOOST_TEST(one.qk_norm);

  const hone::LayerShape two = hone::layer_shape(c, 2, 1);
  BOOST_TEST(two.heads == 4);
  BOOST_TEST(two.kv_heads == 1);
  BOOST_TEST(two.intermediate == 24);
  BOOST_TEST(two.vocab == 51);  // 101 padded to 102
  BOOST_TEST(two.vocab_begin == 51);
  BOOST_TEST(two.vocab_total == 101);

  // tp = 4 > 2 KV heads: each rank keeps one (replicated).
  const hone::LayerShape four = hone::layer_shape(c, 4, 3);
  BOOST_TEST(four.heads == 2);
  BOOST_TEST(four.kv_heads == 1);
  BOOST_TEST(four.vocab * 4 >= 101);
}

BOOST_AUTO_TEST_CASE(layer_shape_refuses_a_tp_that_does_not_divide) {
  const hone::ModelConfig c = config(hone::Architecture::llama, false);
  try {
    hone::layer_shape(c, 3, 0);
    BOOST_FAIL("tp = 3 accepted for 8 heads");
  } catch (const hone::UserError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("parallel.tp = 3") != std::string::npos, m);
    BOOST_TEST(m.find("num_attention_heads") != std::string::npos, m);
    BOOST_TEST(m.find("1, 2, 4 or 8") != std::string::npos, m);
  }
  hone::ModelConfig odd = c;
  odd.num_key_value_heads = 1;
  odd.num_attention_heads = 6;
  odd.intermediate_size = 36;
  BOOST_CHECK_THROW(hone::layer_shape(odd, 4, 0), hone::UserError);  // 4 does not divide 6 heads
  odd.num_key_value_heads = 3;
  odd.num_attention_heads = 6;
  BOOST_CHECK_THROW(hone::layer_shape(odd, 2, 0), hone::UserError);  // 2 neither divides 3 nor is a multiple
}

BOOST_AUTO_TEST_SUITE_END()
