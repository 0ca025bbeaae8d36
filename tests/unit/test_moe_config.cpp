// Qwen3-MoE from config.json and its parameters: the published Qwen3-30B-A3B config (num_experts, rope_theta) and
// the spellings transformers 5 writes (num_local_experts, rope_parameters), mlp_only_layers and decoder_sparse_step,
// the refusals, a config.json written back and read again; the parameter table (the published names, experts last,
// 30.5 B parameters of which 3.3 B active at the real shape); the shard layout under expert (and tensor)
// parallelism: which experts a rank holds, their slices, offsets and norm weights.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <string>

#include "common/paths.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "model/weights.h"
#include "parallel/shard_layout.h"
#include "runtime/error.h"

namespace {

// Qwen3-30B-A3B's config.json as published.
const char* kQwen3_30B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
  "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

std::string config_dir(const std::string& tag, const std::string& text) {
  const std::string dir = test::temp_dir("moe-config-" + tag);
  std::ofstream(dir + "/config.json") << text;
  return dir;
}

std::string with(std::string t, const std::string& from, const std::string& to) {
  const size_t p = t.find(from);
  BOOST_REQUIRE(p != std::string::npos);
  return t.replace(p, from.size(), to);
}

void expect_refusal(const std::string& tag, const std::string& text, const std::string& needle) {
  try {
    hone::load_model_config(config_dir(tag, text));
    BOOST_ERROR("no error for " << tag);
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

hone::ModelConfig small_moe() {
  hone::ModelConfig c = hone::load_model_config(config_dir("small", kQwen3_30B));
  c.num_hidden_layers = 3;
  c.num_experts = 8;
  c.mlp_only_layers = {1};
  c.vocab_size = 64;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.validate();
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(moe_config)

BOOST_AUTO_TEST_CASE(published_qwen3_30b_a3b) {
  const hone::ModelConfig c = hone::load_model_config(config_dir("30b", kQwen3_30B));
  BOOST_TEST((c.arch == hone::Architecture::qwen3_moe));
  BOOST_TEST(c.qk_norm);
  BOOST_TEST(c.num_experts == 128);
  BOOST_TEST(c.num_experts_per_tok == 8);
  BOOST_TEST(c.moe_intermediate_size == 768);
  BOOST_TEST(c.norm_topk_prob);
  BOOST_TEST(c.decoder_sparse_step == 1);
  BOOST_TEST(c.mlp_only_layers.empty());
  BOOST_TEST(c.router_aux_loss_coef == 0.001f);
  BOOST_TEST(c.rope.theta == 1e6f);
  BOOST_TEST(c.num_moe_layers() == 48);
  BOOST_TEST(!c.has_dense_layers());
  // Total and active parameters as Qwen publishes them: 30.5 B, 3.3 B activated.
  BOOST_TEST(c.num_parameters() == 30532122624);
  BOOST_TEST(c.num_active_parameters() == 3353032704);
  // The layer shape: no dense MLP to carve, the experts' width.
  const hone::LayerShape s = hone::layer_shape(c, 4, 1, 8, 3);
  BOOST_TEST(s.intermediate == 0);
  BOOST_TEST(s.moe_intermediate == 192);
  BOOST_TEST(s.experts == 16);
  BOOST_TEST(s.expert_begin == 48);
  BOOST_TEST(s.experts_total == 128);
}

BOOST_AUTO_TEST_CASE(transformers_5_spellings_and_layer_choice) {
  std::string t = with(kQwen3_30B, R"("num_experts": 128,)", R"("num_local_experts": 128,)");
  t = with(t, R"("rope_theta": 1000000.0,)", R"("rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"},)");
  t = with(t, R"("mlp_only_layers": [],)", R"("mlp_only_layers": [0, 5],)");
  t = with(t, R"("decoder_sparse_step": 1,)", R"("decoder_sparse_step": 2,)");
  const hone::ModelConfig c = hone::load_model_config(config_dir("tf5", t));
  BOOST_TEST(c.num_experts == 128);
  BOOST_TEST(c.rope.theta == 5000.f);
  // Sparse: not in mlp_only_layers and (layer + 1) a multiple of 2.
  BOOST_TEST(!c.is_moe_layer(0));
  BOOST_TEST(c.is_moe_layer(1));
  BOOST_TEST(!c.is_moe_layer(2));
  BOOST_TEST(!c.is_moe_layer(5));
  BOOST_TEST(c.is_moe_layer(7));
  BOOST_TEST(c.num_moe_layers() == 23);
  BOOST_TEST(c.has_dense_layers());
  // Both spellings agreeing are fine; disagreeing are refused.
  const std::string both = with(kQwen3_30B, R"("num_experts": 128,)", R"("num_experts": 128, "num_local_experts": 128,)");
  BOOST_TEST(hone::load_model_config(config_dir("both", both)).num_experts == 128);
  expect_refusal("disagree", with(kQwen3_30B, R"("num_experts": 128,)", R"("num_experts": 128, "num_local_experts": 64,)"),
                 "disagree");
}

BOOST_AUTO_TEST_CASE(refusals) {
  expect_refusal("no-experts", with(kQwen3_30B, R"("num_experts": 128,)", ""), "num_experts");
  expect_refusal("k", with(kQwen3_30B, R"("num_experts_per_tok": 8,)", R"("num_experts_per_tok": 200,)"),
                 "num_experts_per_tok");
  expect_refusal("mlp-only", with(kQwen3_30B, R"("mlp_only_layers": [],)", R"("mlp_only_layers": [48],)"),
                 "mlp_only_layers");
  expect_refusal("shared", with(kQwen3_30B, R"("num_experts": 128,)", R"("num_experts": 128, "shared_expert_intermediate_size": 512,)"),
                 "shared experts");
}

BOOST_AUTO_TEST_CASE(config_json_written_back_reads_the_same) {
  hone::ModelConfig c = small_moe();
  c.mlp_only_layers = {0, 2};
  c.decoder_sparse_step = 1;
  c.norm_topk_prob = false;
  const std::string dir = test::temp_dir("moe-config-roundtrip");
  std::ofstream(dir + "/config.json") << hone::model_config_to_hf_json(c);
  const hone::ModelConfig r = hone::load_model_config(dir);
  BOOST_TEST(r.num_experts == c.num_experts);
  BOOST_TEST(r.num_experts_per_tok == c.num_experts_per_tok);
  BOOST_TEST(r.moe_intermediate_size == c.moe_intermediate_size);
  BOOST_TEST(r.norm_topk_prob == c.norm_topk_prob);
  BOOST_TEST(r.mlp_only_layers == c.mlp_only_layers);
  BOOST_TEST(r.router_aux_loss_coef == c.router_aux_loss_coef);
  BOOST_TEST(r.num_parameters() == c.num_parameters());
}

BOOST_AUTO_TEST_CASE(parameter_table_has_the_published_names_experts_last) {
  const hone::ModelConfig c = small_moe();  // layers 0 and 2 sparse, 1 dense
  const auto table = hone::param_table(c);
  bool experts_started = false;
  int experts = 0;
  for (const hone::ParamSpec& s : table) {
    if (s.split == hone::Split::expert) {
      experts_started = true;
      ++experts;
    } else {
      BOOST_TEST(!experts_started, s.name << " after the experts");
    }
  }
  BOOST_TEST(experts == 2 * 3 * 8);
  auto find = [&](const std::string& n) -> const hone::ParamSpec* {
    for (const auto& s : table)
      if (s.name == n) return &s;
    return nullptr;
  };
  BOOST_TEST_REQUIRE(find("model.layers.0.mlp.gate.weight"));
  BOOST_TEST(find("model.layers.0.mlp.gate.weight")->shape == (std::vector<int64_t>{8, 2048}));
  BOOST_TEST(find("model.layers.2.mlp.experts.7.down_proj.weight")->shape == (std::vector<int64_t>{2048, 768}));
  BOOST_TEST(find("model.layers.1.mlp.gate_proj.weight") != nullptr);  // the dense layer
  BOOST_TEST(find("model.layers.1.mlp.gate.weight") == nullptr);
  BOOST_TEST(find("model.layers.0.mlp.gate_proj.weight") == nullptr);
  // The weights: each layer's stacked expert members, each expert's matrix a view into them.
  hone::ModelWeights w = hone::allocate_weights(c);
  BOOST_TEST(w.layers[0].expert_gate.shape() == (std::vector<int64_t>{8, 768, 2048}));
  const hone::ParamSpec* e3 = find("model.layers.0.mlp.experts.3.up_proj.weight");
  BOOST_TEST(w.param(*e3).f32() == w.layers[0].expert_up.f32() + 3 * 768 * 2048);
  const hone::ParamLayout L = hone::ParamLayout::of(c);
  BOOST_TEST(L.num_dense_params + 2 * 3 * 8 * 768 * 2048 == L.num_params);
  BOOST_TEST(L.layers[0][hone::LayerParam::expert_gate] == L.num_dense_params);
  // The globals keep their places in the table (the experts after them must not move them): the same offsets as
  // the weights' flat buffer and as the one-rank shard layout.
  const hone::ParamLayout one = hone::ShardLayout::of(c, 1, 0, nullptr, 0, 1, 0).param_layout();
  BOOST_TEST(L.embed_tokens == 0);
  BOOST_TEST(L.embed_tokens == w.embed_tokens.f32() - w.flat.f32());
  BOOST_TEST(L.norm == w.norm.f32() - w.flat.f32());
  BOOST_TEST(L.lm_head == w.lm_head.f32() - w.flat.f32());
  BOOST_TEST(L.norm == one.norm);
  BOOST_TEST(L.lm_head == one.lm_head);
  for (int l = 0; l < c.num_hidden_layers; ++l)
    for (int i = 0; i < hone::kNumLayerParams; ++i)
      BOOST_TEST(L.layers[size_t(l)][hone::LayerParam(i)] == one.layers[size_t(l)][hone::LayerParam(i)]);
}

BOOST_AUTO_TEST_CASE(shard_layout_under_expert_and_tensor_parallelism) {
  const hone::ModelConfig c = small_moe();
  const hone::ParamLayout whole = hone::ParamLayout::of(c);
  int64_t experts_total = 0;
  for (int r = 0; r < 4; ++r) {
    const int tp_rank = r % 2, ep_rank = r / 2;
    const hone::ShardLayout L = hone::ShardLayout::of(c, 2, tp_rank, nullptr, 0, 2, ep_rank);
    for (const hone::ParamShard& p : L.params()) {
      if (!p.expert()) {
        BOOST_TEST(p.holders % 2 == 0, p.spec.name << ": every expert-parallel rank holds it");
        continue;
      }
      BOOST_TEST((p.spec.expert >= 4 * ep_rank && p.spec.expert < 4 * ep_rank + 4), p.spec.name);
      BOOST_TEST(p.holders == 1);
      BOOST_TEST(!p.partial_grad);
      const bool down = p.spec.param == hone::LayerParam::expert_down;
      BOOST_TEST(p.slice.dim == (down ? 1 : 0));
      BOOST_TEST(p.slice.begin == 384 * tp_rank);
      BOOST_TEST(p.slice.count == 384);
      experts_total += p.local_numel();
    }
    // The router: replicated, its gradient summed over tp.
    BOOST_TEST(L.find("model.layers.0.mlp.gate.weight").partial_grad);
    // Whole offsets: an expert's place in the whole model's flat buffer.
    const hone::ParamShard& e = L.find(hone::layer_param_name(2, hone::LayerParam::expert_up, 4 * ep_rank + 1));
    BOOST_TEST(e.whole_offset == whole.layers[2][hone::LayerParam::expert_up] + (4 * ep_rank + 1) * 768 * 2048);
    BOOST_TEST(L.param_layout().num_dense_params == L.num_dense_params());
  }
  BOOST_TEST(experts_total == 2 * 3 * 8 * 768 * 2048);  // every expert matrix's every value, once over the 4 ranks
  BOOST_CHECK_THROW(hone::ShardLayout::of(c, 1, 0, nullptr, 0, 3, 0), hone::UserError);  // 3 does not divide 8 experts
}

BOOST_AUTO_TEST_SUITE_END()
