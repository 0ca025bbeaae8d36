// ModelConfig from Hugging Face config.json: the three architectures, both spellings of the RoPE fields, the
// refusals of what hone does not compute, validation, parameter counts, and writing a config.json back.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/paths.h"
#include "model/model_config.h"
#include "runtime/error.h"

namespace {

std::string golden(const std::string& arch) { return test::source_dir() + "/tests/data/hf/" + arch; }

// A folder holding config.json with `text`.
std::string config_dir(const std::string& tag, const std::string& text) {
  const std::string dir = test::temp_dir("model-config-" + tag);
  std::ofstream(dir + "/config.json") << text;
  return dir;
}

// The configuration of Llama-3.2-1B as published (classic field names).
const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048,
  "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "vocab_size": 128256})";

// The configuration of Qwen3-0.6B as published.
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
  "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// kQwen3 with one field replaced (or added) by `field: value`.
std::string qwen3_with(const std::string& field, const std::string& value) {
  std::string t = kQwen3;
  const std::string key = "\"" + field + "\": ";
  size_t p = t.find(key);
  if (p == std::string::npos) return "{" + key + value + ", " + t.substr(1);
  size_t e = t.find_first_of(",}", p + key.size());
  return t.substr(0, p + key.size()) + value + t.substr(e);
}

void expect_refusal(const std::string& tag, const std::string& text, const std::string& needle) {
  const std::string dir = config_dir(tag, text);
  try {
    hone::load_model_config(dir);
    BOOST_ERROR("no error for " << tag);
  } catch (const hone::UserError& e) {
    const std::string msg = e.what();
    BOOST_TEST_INFO(tag << ": " << msg);
    BOOST_TEST(msg.find(needle) != std::string::npos);
    BOOST_TEST(msg.find("config.json") != std::string::npos);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_config)

BOOST_AUTO_TEST_CASE(llama_golden_with_llama3_rope_and_tied_embeddings) {
  const hone::ModelConfig c = hone::load_model_config(golden("llama"));
  BOOST_TEST(int(c.arch) == int(hone::Architecture::llama));
  BOOST_TEST(c.vocab_size == 96);
  BOOST_TEST(c.hidden_size == 32);
  BOOST_TEST(c.intermediate_size == 64);
  BOOST_TEST(c.num_hidden_layers == 2);
  BOOST_TEST(c.num_attention_heads == 4);
  BOOST_TEST(c.num_key_value_heads == 2);
  BOOST_TEST(c.head_dim == 8);
  BOOST_TEST(c.rope.head_dim == 8);
  BOOST_TEST(c.rope.llama3);
  BOOST_TEST(c.rope.theta == 10000.f);
  BOOST_TEST(c.rope.factor == 4.f);
  BOOST_TEST(c.rope.low_freq_factor == 1.f);
  BOOST_TEST(c.rope.high_freq_factor == 4.f);
  BOOST_TEST(c.rope.original_max_position_embeddings == 16);
  BOOST_TEST(c.tie_word_embeddings);
  BOOST_TEST(!c.attention_bias);
  BOOST_TEST(!c.qk_norm);
  BOOST_TEST(c.bos_token_id == 1);
  BOOST_TEST(c.eos_token_ids == std::vector<int>{2});
  BOOST_TEST(c.torch_dtype == "float32");  // newer transformers write "dtype"
  BOOST_TEST(c.num_parameters() == 21664);  // sum of numel over transformers' named_parameters()
}

BOOST_AUTO_TEST_CASE(qwen2_golden_has_qkv_bias) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen2"));
  BOOST_TEST(int(c.arch) == int(hone::Architecture::qwen2));
  BOOST_TEST(c.attention_bias);
  BOOST_TEST(!c.qk_norm);
  BOOST_TEST(!c.tie_word_embeddings);
  BOOST_TEST(!c.rope.llama3);
  BOOST_TEST(c.head_dim == 8);
  BOOST_TEST(c.num_parameters() == 24864);
}

BOOST_AUTO_TEST_CASE(qwen3_golden_has_qk_norm_and_explicit_head_dim) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen3"));
  BOOST_TEST(int(c.arch) == int(hone::Architecture::qwen3));
  BOOST_TEST(c.qk_norm);
  BOOST_TEST(!c.attention_bias);
  BOOST_TEST(c.head_dim == 16);
  BOOST_TEST(c.q_dim() == 64);
  BOOST_TEST(c.kv_dim() == 32);
  BOOST_TEST(c.rope.theta == 1e6f);  // from rope_parameters
  BOOST_TEST(c.num_parameters() == 30944);
}

BOOST_AUTO_TEST_CASE(published_llama_3_2_1b_config) {
  const hone::ModelConfig c = hone::load_model_config(config_dir("llama32", kLlama32));
  BOOST_TEST(c.rope.theta == 500000.f);
  BOOST_TEST(c.rope.llama3);
  BOOST_TEST(c.rope.factor == 32.f);
  BOOST_TEST(c.rope.original_max_position_embeddings == 8192);
  BOOST_TEST(c.head_dim == 64);
  BOOST_TEST(c.rms_norm_eps == 1e-5f);
  BOOST_TEST((c.eos_token_ids == std::vector<int>{128001, 128008, 128009}));
  BOOST_TEST(c.bos_token_id == 128000);
  BOOST_TEST(c.torch_dtype == "bfloat16");
  BOOST_TEST(c.num_parameters() == 1235814400);  // transformers' count for this config
}

BOOST_AUTO_TEST_CASE(published_qwen3_0_6b_config) {
  const hone::ModelConfig c = hone::load_model_config(config_dir("qwen3-06b", kQwen3));
  BOOST_TEST(c.rope.theta == 1e6f);
  BOOST_TEST(!c.rope.llama3);
  BOOST_TEST(c.head_dim == 128);
  BOOST_TEST(c.q_dim() == 2048);
  BOOST_TEST(c.eos_token_ids == std::vector<int>{151645});
  BOOST_TEST(c.num_parameters() == 596049920);  // transformers' count for this config
}

BOOST_AUTO_TEST_CASE(head_dim_defaults_to_hidden_over_heads) {
  std::string t = kLlama32;
  t.replace(t.find("\"head_dim\": 64, "), std::string("\"head_dim\": 64, ").size(), "");
  const hone::ModelConfig c = hone::load_model_config(config_dir("nohead", t));
  BOOST_TEST(c.head_dim == 2048 / 32);
}

BOOST_AUTO_TEST_CASE(model_type_alone_names_the_architecture) {
  std::string t = kQwen3;
  t.replace(t.find("\"architectures\": [\"Qwen3ForCausalLM\"], "),
            std::string("\"architectures\": [\"Qwen3ForCausalLM\"], ").size(), "");
  BOOST_TEST(int(hone::load_model_config(config_dir("modeltype", t)).arch) == int(hone::Architecture::qwen3));
}

BOOST_AUTO_TEST_CASE(hf_json_round_trip_for_every_architecture) {
  for (const std::string& dir : {golden("llama"), golden("qwen2"), golden("qwen3"), config_dir("rt-l", kLlama32)}) {
    const hone::ModelConfig a = hone::load_model_config(dir);
    const hone::ModelConfig b = hone::load_model_config(config_dir("rt", hone::model_config_to_hf_json(a)));
    BOOST_TEST_INFO(dir);
    BOOST_TEST(int(a.arch) == int(b.arch));
    BOOST_TEST(a.vocab_size == b.vocab_size);
    BOOST_TEST(a.hidden_size == b.hidden_size);
    BOOST_TEST(a.intermediate_size == b.intermediate_size);
    BOOST_TEST(a.num_hidden_layers == b.num_hidden_layers);
    BOOST_TEST(a.num_attention_heads == b.num_attention_heads);
    BOOST_TEST(a.num_key_value_heads == b.num_key_value_heads);
    BOOST_TEST(a.head_dim == b.head_dim);
    BOOST_TEST(a.max_position_embeddings == b.max_position_embeddings);
    BOOST_TEST(a.rms_norm_eps == b.rms_norm_eps);
    BOOST_TEST(a.rope.theta == b.rope.theta);
    BOOST_TEST(a.rope.llama3 == b.rope.llama3);
    BOOST_TEST(a.rope.factor == b.rope.factor);
    BOOST_TEST(a.rope.original_max_position_embeddings == b.rope.original_max_position_embeddings);
    BOOST_TEST(a.tie_word_embeddings == b.tie_word_embeddings);
    BOOST_TEST(a.attention_bias == b.attention_bias);
    BOOST_TEST(a.qk_norm == b.qk_norm);
    BOOST_TEST(a.bos_token_id == b.bos_token_id);
    BOOST_TEST(a.eos_token_ids == b.eos_token_ids);
    BOOST_TEST(a.torch_dtype == b.torch_dtype);
  }
  const std::string text = hone::model_config_to_hf_json(hone::load_model_config(golden("qwen2")));
  BOOST_TEST(text.find("\"Qwen2ForCausalLM\"") != std::string::npos);
  BOOST_TEST(text.find("\"model_type\": \"qwen2\"") != std::string::npos);
  BOOST_TEST(text.find("\"torch_dtype\": \"float32\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unsupported_architecture_is_refused_by_name) {
  std::string t = kQwen3;
  t.replace(t.find("Qwen3ForCausalLM"), 16, "MistralForCausalLM");
  expect_refusal("mistral", t, "unsupported architecture 'MistralForCausalLM' (supported: LlamaForCausalLM");
}

BOOST_AUTO_TEST_CASE(unsupported_rope_type_is_refused_by_name) {
  expect_refusal("yarn", qwen3_with("rope_scaling", R"({"rope_type": "yarn", "factor": 4.0})"),
                 "unsupported rope_scaling.rope_type 'yarn'");
  expect_refusal("linear-old", qwen3_with("rope_scaling", R"({"type": "linear", "factor": 2.0})"), "'linear'");
}

BOOST_AUTO_TEST_CASE(other_unsupported_features_are_refused_by_name) {
  expect_refusal("act", qwen3_with("hidden_act", "\"gelu\""), "unsupported hidden_act 'gelu'");
  expect_refusal("sliding", qwen3_with("use_sliding_window", "true"), "use_sliding_window");
  expect_refusal("layer-types", qwen3_with("layer_types", R"(["full_attention", "sliding_attention"])"),
                 "sliding_attention");
  expect_refusal("qwen3-bias", qwen3_with("attention_bias", "true"), "attention_bias");
  std::string llama_bias = kLlama32;
  llama_bias.replace(llama_bias.find("\"attention_bias\": false"), 23, "\"attention_bias\": true");
  expect_refusal("llama-bias", llama_bias, "attention_bias true is not supported for LlamaForCausalLM");
  std::string mlp_bias = kLlama32;
  mlp_bias.replace(mlp_bias.find("\"mlp_bias\": false"), 17, "\"mlp_bias\": true");
  expect_refusal("mlp-bias", mlp_bias, "mlp_bias");
  expect_refusal("llama3-incomplete", qwen3_with("rope_scaling", R"({"rope_type": "llama3", "factor": 8.0})"),
                 "low_freq_factor");
}

BOOST_AUTO_TEST_CASE(bad_fields_and_shapes_are_user_errors) {
  expect_refusal("missing", qwen3_with("hidden_size", "null"), "missing field 'hidden_size'");
  expect_refusal("type", qwen3_with("vocab_size", "\"big\""), "'vocab_size' must be an integer");
  expect_refusal("gqa", qwen3_with("num_key_value_heads", "5"), "multiple of num_key_value_heads");
  expect_refusal("negative", qwen3_with("num_hidden_layers", "-2"), "num_hidden_layers must be positive");
  expect_refusal("odd-head", qwen3_with("head_dim", "7"), "head_dim must be even");
  expect_refusal("eos-range", qwen3_with("eos_token_id", "999999"), "eos_token_id 999999");
  expect_refusal("json", "{\"architectures\": [", "not valid JSON");
  BOOST_CHECK_THROW(hone::load_model_config(test::temp_dir("model-config-empty")), hone::UserError);
}

BOOST_AUTO_TEST_CASE(validate_names_the_inconsistent_field) {
  hone::ModelConfig c = hone::load_model_config(golden("qwen3"));
  BOOST_CHECK_NO_THROW(c.validate());
  hone::ModelConfig bad = c;
  bad.rope.head_dim = 8;
  BOOST_CHECK_EXCEPTION(bad.validate(), hone::UserError,
                        [](const hone::UserError& e) { return std::string(e.what()).find("rope.head_dim") != std::string::npos; });
  bad = c;
  bad.qk_norm = false;
  BOOST_CHECK_EXCEPTION(bad.validate(), hone::UserError,
                        [](const hone::UserError& e) { return std::string(e.what()).find("qk_norm") != std::string::npos; });
  bad = c;
  bad.intermediate_size = 0;
  BOOST_CHECK_EXCEPTION(bad.validate(), hone::UserError, [](const hone::UserError& e) {
    return std::string(e.what()).find("intermediate_size") != std::string::npos;
  });
}

// Shapes past any model (a billion layers, a vocabulary of 2^31 tokens of width 2^31, a million experts) used to
// pass validation, and the parameter table and per-layer state were built for them before any memory plan: 11 GB in
// 25 s. Refused by hone's limits before anything per layer is built; a shape inside them is left to the memory plans
// (rl/host_memory_plan.h), which weigh parameter_count_bound().
BOOST_AUTO_TEST_CASE(shapes_past_hones_limits_are_refused_before_anything_is_built) {
  // kQwen3 with fields replaced or added, in order.
  auto with = [](std::initializer_list<std::pair<std::string, std::string>> fields) {
    std::string t = kQwen3;
    for (const auto& [field, value] : fields) {
      const std::string key = "\"" + field + "\": ";
      const size_t p = t.find(key);
      if (p == std::string::npos) {
        t = "{" + key + value + ", " + t.substr(1);
      } else {
        const size_t e = t.find_first_of(",}", p + key.size());
        t = t.substr(0, p + key.size()) + value + t.substr(e);
      }
    }
    return t;
  };
  expect_refusal("layers", with({{"num_hidden_layers", "1000000000"}}),
                 "num_hidden_layers = 1000000000 is more than hone's limit of 16384 layers");
  expect_refusal("width", with({{"hidden_size", "2147483647"}}), "parameters, more than hone's limit of 2^48");
  expect_refusal("vocab", with({{"vocab_size", "2147483647"}, {"hidden_size", "262144"}}),
                 "parameters, more than hone's limit of 2^48");
  expect_refusal("mlp", with({{"intermediate_size", "2147483647"}, {"num_hidden_layers", "9000"}}),
                 "more than hone's limit of 2^48");
  expect_refusal("heads", with({{"num_attention_heads", "16777216"}, {"num_key_value_heads", "16777216"}}),
                 "num_attention_heads x head_dim = 16777216 x 128 is beyond 32 bits");
  auto moe = [&](const char* experts) {
    return with({{"architectures", "[\"Qwen3MoeForCausalLM\"]"}, {"num_experts_per_tok", "8"},
                 {"moe_intermediate_size", "8"}, {"num_experts", experts}});
  };
  BOOST_CHECK_NO_THROW(hone::load_model_config(config_dir("moe-ok", moe("128"))));
  expect_refusal("experts", moe("1000000"), "num_experts = 1000000 is more than hone's limit of 65536 experts per layer");
  expect_refusal("expert-matrices", moe("60000"), "expert matrices, more than hone's limit of 1048576");
  // The bound is the table's count in closed form.
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    const hone::ModelConfig c = hone::load_model_config(golden(arch));
    BOOST_TEST(c.parameter_count_bound() == double(c.num_parameters()), arch);
  }
  for (const std::string& text : {std::string(kLlama32), std::string(kQwen3), moe("128")}) {
    const hone::ModelConfig c = hone::load_model_config(config_dir("count", text));
    BOOST_TEST(c.parameter_count_bound() == double(c.num_parameters()));
  }
}

// config.json read with no check of its nesting: 100,000 [ went to the JSON library, which copies and compares
// recursively. Refused before parsing, as for every other JSON file hone reads.
BOOST_AUTO_TEST_CASE(a_deeply_nested_config_json_is_refused_before_parsing) {
  expect_refusal("deep", qwen3_with("extra", std::string(100000, '[') + std::string(100000, ']')),
                 "JSON nested deeper than 256 levels");
}

BOOST_AUTO_TEST_SUITE_END()
