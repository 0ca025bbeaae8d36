// ModelConfig from and to a Hugging Face config.json. Reads both the classic field names (rope_theta,
// rope_scaling, torch_dtype) and those newer transformers releases write (rope_parameters, dtype); refuses by name
// whatever hone's engine does not compute (other architectures, sliding windows, other RoPE scalings, biases
// outside q/k/v), so a checkpoint is never run with a silently different model.
#include "model/model_config.h"

#include "model/param_table.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdint>
#include <utility>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/json_nesting.h"
#include "runtime/error.h"

namespace hone {

using json = nlohmann::json;

const char* architecture_hf_name(Architecture a) {
  switch (a) {
    case Architecture::llama: return "LlamaForCausalLM";
    case Architecture::qwen2: return "Qwen2ForCausalLM";
    case Architecture::qwen3: return "Qwen3ForCausalLM";
    case Architecture::qwen3_moe: return "Qwen3MoeForCausalLM";
  }
  return "?";
}

static const char* architecture_model_type(Architecture a) {
  switch (a) {
    case Architecture::llama: return "llama";
    case Architecture::qwen2: return "qwen2";
    case Architecture::qwen3: return "qwen3";
    case Architecture::qwen3_moe: return "qwen3_moe";
  }
  return "?";
}

int64_t ModelConfig::num_parameters() const { return count_parameters(*this); }
int64_t ModelConfig::num_active_parameters() const { return count_active_parameters(*this); }

bool ModelConfig::is_moe_layer(int layer) const {
  if (num_experts <= 0 || decoder_sparse_step <= 0) return false;
  // Sorted (validate): a search, so that a model of many layers listing many of them is not quadratic to walk.
  if (std::binary_search(mlp_only_layers.begin(), mlp_only_layers.end(), layer)) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

int ModelConfig::num_moe_layers() const {
  int n = 0;
  for (int l = 0; l < num_hidden_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

namespace {

// Sizes far past any model trained (the largest published have some 130 layers and 256 experts per layer): they
// bound what is built per layer and per expert (the parameter table, per-layer state) before a memory plan can
// count bytes, and keep every parameter count far inside 64 bits. What does fit these bounds is then weighed in
// bytes against the memory there is (rl/host_memory_plan.h, rl/device_memory_plan.h).
constexpr int kMaxLayers = 16384;   // also the deck's range of model.num_layers (config/schema.cpp)
constexpr int kMaxExperts = 65536;  // and of model.num_experts
constexpr int64_t kMaxExpertMatrices = int64_t(1) << 20;  // gate, up and down of every expert of every sparse layer
constexpr double kMaxParameters = 281474976710656.0;      // 2^48 (a petabyte of fp32)

}  // namespace

double ModelConfig::parameter_count_bound() const {
  const double V = vocab_size, C = hidden_size, I = intermediate_size, L = num_hidden_layers;
  const double Q = double(num_attention_heads) * double(head_dim), K = double(num_key_value_heads) * double(head_dim);
  const double sparse = is_moe() ? double(num_moe_layers()) : 0.0;
  double n = V * C * (tie_word_embeddings ? 1.0 : 2.0) + C;
  n += L * (2.0 * Q * C + 2.0 * K * C + 2.0 * C);  // attention projections, the two layer norms
  if (attention_bias) n += L * (Q + 2.0 * K);
  if (qk_norm) n += L * 2.0 * double(head_dim);
  n += (L - sparse) * 3.0 * C * I;                                                         // dense MLPs
  n += sparse * double(num_experts) * C * (1.0 + 3.0 * double(moe_intermediate_size));     // router, experts
  return n;
}

void ModelConfig::validate() const {
  auto positive = [](int v, const char* name) {
    HONE_USER_CHECK(v > 0, "model config: ", name, " must be positive (got ", v, ")");
  };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(num_key_value_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  HONE_USER_CHECK(num_hidden_layers <= kMaxLayers, "model config: num_hidden_layers = ", num_hidden_layers,
                  " is more than hone's limit of ", kMaxLayers, " layers");
  for (const auto& [heads, name] : {std::pair{num_attention_heads, "num_attention_heads"},
                                    std::pair{num_key_value_heads, "num_key_value_heads"}})
    HONE_USER_CHECK(int64_t(heads) * head_dim <= INT32_MAX, "model config: ", name, " x head_dim = ", heads, " x ",
                    head_dim, " is beyond 32 bits (", INT32_MAX, ")");
  if (is_moe()) {
    HONE_USER_CHECK(num_experts <= kMaxExperts, "model config: num_experts = ", num_experts,
                    " is more than hone's limit of ", kMaxExperts, " experts per layer");
    HONE_USER_CHECK(int64_t(mlp_only_layers.size()) <= num_hidden_layers, "model config: mlp_only_layers lists ",
                    mlp_only_layers.size(), " layers of ", num_hidden_layers);
    HONE_USER_CHECK(std::adjacent_find(mlp_only_layers.begin(), mlp_only_layers.end(), std::greater_equal<int>()) ==
                        mlp_only_layers.end(),
                    "model config: mlp_only_layers must be ascending without repeats");
    const int64_t matrices = 3 * int64_t(num_experts) * num_moe_layers();
    HONE_USER_CHECK(matrices <= kMaxExpertMatrices, "model config: num_experts = ", num_experts, " in ",
                    num_moe_layers(), " sparse layers are ", matrices, " expert matrices, more than hone's limit of ",
                    kMaxExpertMatrices);
  }
  const double params = parameter_count_bound();
  HONE_USER_CHECK(params <= kMaxParameters, "model config: the shape (vocab_size ", vocab_size, ", hidden_size ",
                  hidden_size, ", intermediate_size ", intermediate_size, ", num_hidden_layers ", num_hidden_layers,
                  is_moe() ? cat(", num_experts ", num_experts, " of moe_intermediate_size ", moe_intermediate_size) : "",
                  ") has about ", params, " parameters, more than hone's limit of 2^48");
  HONE_USER_CHECK(num_attention_heads % num_key_value_heads == 0, "model config: num_attention_heads (",
                  num_attention_heads, ") must be a multiple of num_key_value_heads (", num_key_value_heads, ")");
  HONE_USER_CHECK(head_dim % 2 == 0, "model config: head_dim must be even for RoPE (got ", head_dim, ")");
  HONE_USER_CHECK(rope.head_dim == head_dim, "model config: rope.head_dim (", rope.head_dim, ") differs from head_dim (",
                  head_dim, ")");
  HONE_USER_CHECK(std::isfinite(rms_norm_eps) && rms_norm_eps > 0.f, "model config: rms_norm_eps must be positive");
  HONE_USER_CHECK(std::isfinite(rope.theta) && rope.theta > 0.f, "model config: rope_theta must be positive");
  if (rope.llama3) {
    HONE_USER_CHECK(rope.factor > 0.f, "model config: rope_scaling.factor must be positive");
    HONE_USER_CHECK(rope.low_freq_factor > 0.f && rope.high_freq_factor > rope.low_freq_factor,
                    "model config: rope_scaling needs 0 < low_freq_factor < high_freq_factor (got ",
                    rope.low_freq_factor, ", ", rope.high_freq_factor, ")");
    HONE_USER_CHECK(rope.original_max_position_embeddings > 0,
                    "model config: rope_scaling.original_max_position_embeddings must be positive");
  }
  const bool wants_bias = arch == Architecture::qwen2;
  const bool wants_qk_norm = arch == Architecture::qwen3 || arch == Architecture::qwen3_moe;
  HONE_USER_CHECK(attention_bias == wants_bias, "model config: attention_bias must be ", wants_bias ? "true" : "false",
                  " for ", architecture_hf_name(arch));
  HONE_USER_CHECK(qk_norm == wants_qk_norm, "model config: qk_norm must be ", wants_qk_norm ? "true" : "false",
                  " for ", architecture_hf_name(arch));
  if (arch == Architecture::qwen3_moe) {
    positive(num_experts, "num_experts");
    positive(moe_intermediate_size, "moe_intermediate_size");
    positive(decoder_sparse_step, "decoder_sparse_step");
    HONE_USER_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts,
                    "model config: num_experts_per_tok must be in [1, num_experts = ", num_experts, "] (got ",
                    num_experts_per_tok, ")");
    for (int l : mlp_only_layers)
      HONE_USER_CHECK(l >= 0 && l < num_hidden_layers, "model config: mlp_only_layers holds ", l,
                      ", not a layer of [0, ", num_hidden_layers, ")");
    HONE_USER_CHECK(std::isfinite(router_aux_loss_coef) && router_aux_loss_coef >= 0.f,
                    "model config: router_aux_loss_coef must be a non-negative number");
  } else {
    HONE_USER_CHECK(num_experts == 0, "model config: ", architecture_hf_name(arch),
                    " has no experts (num_experts must be 0, got ", num_experts, ")");
  }
  if (bos_token_id >= 0)
    HONE_USER_CHECK(bos_token_id < vocab_size, "model config: bos_token_id ", bos_token_id, " is not below vocab_size ",
                    vocab_size);
  for (int e : eos_token_ids)
    HONE_USER_CHECK(e >= 0 && e < vocab_size, "model config: eos_token_id ", e, " is outside [0, ", vocab_size, ")");
}

namespace {

// Field readers that name the file and the field in every error.
struct ConfigReader {
  std::string where;  // "<dir>/config.json"
  const json& j;

  [[noreturn]] void fail(const std::string& msg) const { throw UserError(cat(where, ": ", msg)); }

  bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }

  int get_int(const json& obj, const std::string& key, const std::string& label) const {
    return as_int(obj.at(key), label);
  }
  int as_int(const json& v, const std::string& label) const {
    if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
      fail(cat("field '", label, "' must be an integer (got ", v.dump(), ")"));
    const double d = v.get<double>();
    if (d < -2147483648.0 || d > 2147483647.0) fail(cat("field '", label, "' is out of range (", v.dump(), ")"));
    return int(v.get<int64_t>());
  }
  int req_int(const char* key) const {
    if (!has(key)) fail(cat("missing field '", key, "'"));
    return get_int(j, key, key);
  }
  int opt_int(const char* key, int fallback) const { return has(key) ? get_int(j, key, key) : fallback; }

  double get_num(const json& obj, const std::string& key, const std::string& label) const {
    const json& v = obj.at(key);
    if (!v.is_number()) fail(cat("field '", label, "' must be a number (got ", v.dump(), ")"));
    return v.get<double>();
  }
  double opt_num(const char* key, double fallback) const { return has(key) ? get_num(j, key, key) : fallback; }

  bool opt_bool(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_boolean()) fail(cat("field '", key, "' must be true or false (got ", j.at(key).dump(), ")"));
    return j.at(key).get<bool>();
  }
  std::string opt_string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j.at(key).is_string()) fail(cat("field '", key, "' must be a string (got ", j.at(key).dump(), ")"));
    return j.at(key).get<std::string>();
  }
};

Architecture parse_architecture(const ConfigReader& r) {
  static const char* kSupported = "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM";
  std::string name;
  if (r.has("architectures")) {
    const json& a = r.j.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string())
      r.fail(cat("field 'architectures' must be a non-empty list of names (got ", a.dump(), ")"));
    name = a[0].get<std::string>();
  } else if (r.has("model_type")) {
    const std::string t = r.opt_string("model_type", "");
    if (t == "llama") return Architecture::llama;
    if (t == "qwen2") return Architecture::qwen2;
    if (t == "qwen3") return Architecture::qwen3;
    if (t == "qwen3_moe") return Architecture::qwen3_moe;
    r.fail(cat("unsupported model_type '", t, "' (supported: llama, qwen2, qwen3, qwen3_moe)"));
  } else {
    r.fail("missing field 'architectures'");
  }
  if (name == "LlamaForCausalLM") return Architecture::llama;
  if (name == "Qwen2ForCausalLM") return Architecture::qwen2;
  if (name == "Qwen3ForCausalLM") return Architecture::qwen3;
  if (name == "Qwen3MoeForCausalLM") return Architecture::qwen3_moe;
  r.fail(cat("unsupported architecture '", name, "' (supported: ", kSupported, ")"));
}

// rope_scaling (classic) or rope_parameters (newer transformers, which also carries rope_theta).
void parse_rope(const ConfigReader& r, ModelConfig& c) {
  c.rope.head_dim = c.head_dim;
  c.rope.theta = float(r.opt_num("rope_theta", 10000.0));
  const char* key = r.has("rope_scaling") ? "rope_scaling" : (r.has("rope_parameters") ? "rope_parameters" : nullptr);
  if (!key) return;
  const json& s = r.j.at(key);
  if (!s.is_object()) r.fail(cat("field '", key, "' must be an object (got ", s.dump(), ")"));
  const std::string prefix = std::string(key) + ".";
  if (s.contains("rope_theta") && !s.at("rope_theta").is_null() && !r.has("rope_theta"))
    c.rope.theta = float(r.get_num(s, "rope_theta", prefix + "rope_theta"));
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (s.contains(k) && !s.at(k).is_null()) {
      if (!s.at(k).is_string()) r.fail(cat("field '", prefix, k, "' must be a string"));
      type = s.at(k).get<std::string>();
      break;
    }
  }
  if (type == "default") return;
  if (type != "llama3") r.fail(cat("unsupported ", prefix, "rope_type '", type, "' (supported: default, llama3)"));
  auto num = [&](const char* k) {
    if (!s.contains(k) || s.at(k).is_null()) r.fail(cat("missing field '", prefix, k, "' for rope_type llama3"));
    return r.get_num(s, k, prefix + k);
  };
  c.rope.llama3 = true;
  c.rope.factor = float(num("factor"));
  c.rope.low_freq_factor = float(num("low_freq_factor"));
  c.rope.high_freq_factor = float(num("high_freq_factor"));
  if (!s.contains("original_max_position_embeddings") || s.at("original_max_position_embeddings").is_null())
    r.fail(cat("missing field '", prefix, "original_max_position_embeddings' for rope_type llama3"));
  c.rope.original_max_position_embeddings =
      r.get_int(s, "original_max_position_embeddings", prefix + "original_max_position_embeddings");
}

std::vector<int> parse_token_ids(const ConfigReader& r, const char* key) {
  std::vector<int> ids;
  if (!r.has(key)) return ids;
  const json& v = r.j.at(key);
  if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      const bool in_int = v[i].is_number_integer() && (v[i].is_number_unsigned() ? v[i].get<uint64_t>() <= INT32_MAX
                                                                                 : v[i].get<int64_t>() >= INT32_MIN);
      if (!in_int) r.fail(cat("field '", key, "' must be an integer or a list of integers (of 32 bits)"));
      ids.push_back(static_cast<int>(v[i].get<int64_t>()));
    }
  } else {
    ids.push_back(r.get_int(r.j, key, key));
  }
  return ids;
}

// The experts of a Qwen3-MoE config: num_experts as the published checkpoints spell it, num_local_experts as
// transformers 5 writes it (both given must agree).
void parse_experts(const ConfigReader& r, ModelConfig& c) {
  if (c.arch != Architecture::qwen3_moe) return;
  const bool a = r.has("num_experts"), b = r.has("num_local_experts");
  if (!a && !b) r.fail("missing field 'num_experts' (or 'num_local_experts')");
  c.num_experts = a ? r.req_int("num_experts") : r.req_int("num_local_experts");
  if (a && b && r.req_int("num_local_experts") != c.num_experts)
    r.fail(cat("fields 'num_experts' (", c.num_experts, ") and 'num_local_experts' (", r.req_int("num_local_experts"),
               ") disagree"));
  c.num_experts_per_tok = r.req_int("num_experts_per_tok");
  c.moe_intermediate_size = r.req_int("moe_intermediate_size");
  c.norm_topk_prob = r.opt_bool("norm_topk_prob", false);
  c.decoder_sparse_step = r.opt_int("decoder_sparse_step", 1);
  c.router_aux_loss_coef = float(r.opt_num("router_aux_loss_coef", 0.001));
  if (r.has("mlp_only_layers")) {
    const json& v = r.j.at("mlp_only_layers");
    if (!v.is_array()) r.fail(cat("field 'mlp_only_layers' must be a list of layer indices (got ", v.dump(), ")"));
    for (size_t i = 0; i < v.size(); ++i) c.mlp_only_layers.push_back(r.as_int(v[i], cat("mlp_only_layers[", i, "]")));
    // A set of layers, as transformers reads it: kept sorted for is_moe_layer's search.
    std::sort(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
    c.mlp_only_layers.erase(std::unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end()), c.mlp_only_layers.end());
  }
  if (r.has("shared_expert_intermediate_size") && r.opt_int("shared_expert_intermediate_size", 0) != 0)
    r.fail("shared experts (shared_expert_intermediate_size) are not supported");
}

// Features hone does not compute: refused by name rather than ignored.
void refuse_unsupported(const ConfigReader& r, const ModelConfig& c) {
  const std::string act = r.has("hidden_act") ? r.opt_string("hidden_act", "silu") : r.opt_string("hidden_activation", "silu");
  if (act != "silu") r.fail(cat("unsupported hidden_act '", act, "' (supported: silu)"));
  if (r.opt_bool("use_sliding_window", false))
    r.fail("use_sliding_window true is not supported (hone computes full causal attention)");
  if (r.has("layer_types")) {
    const json& lt = r.j.at("layer_types");
    if (!lt.is_array()) r.fail("field 'layer_types' must be a list");
    for (size_t i = 0; i < lt.size(); ++i)
      if (!lt[i].is_string() || lt[i].get<std::string>() != "full_attention")
        r.fail(cat("layer_types[", i, "] is ", lt[i].dump(), ": only \"full_attention\" is supported"));
  }
  if (c.arch != Architecture::qwen2 && r.opt_bool("attention_bias", false))
    r.fail(cat("attention_bias true is not supported for ", architecture_hf_name(c.arch),
               " (it adds a bias to o_proj too; hone supports q/k/v biases as in Qwen2 only)"));
  if (r.opt_bool("mlp_bias", false)) r.fail("mlp_bias true is not supported");
  if (r.opt_int("pretraining_tp", 1) != 1) r.fail("pretraining_tp other than 1 is not supported");
  if (r.has("quantization_config")) r.fail("quantized checkpoints (quantization_config) are not supported");
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  HONE_USER_CHECK(in.good(), "cannot open ", path, " (is '", dir, "' a Hugging Face model folder?)");
  std::stringstream ss;
  ss << in.rdbuf();
  check_json_nesting(ss.str(), path);
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::exception& e) {
    throw UserError(cat(path, ": not valid JSON: ", e.what()));
  }
  HONE_USER_CHECK(j.is_object(), path, ": expected a JSON object at the top level");
  const ConfigReader r{path, j};

  ModelConfig c;
  c.arch = parse_architecture(r);
  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.num_hidden_layers = r.req_int("num_hidden_layers");
  c.num_attention_heads = r.req_int("num_attention_heads");
  c.num_key_value_heads = r.opt_int("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads <= 0) r.fail("num_attention_heads must be positive");
  c.head_dim = r.opt_int("head_dim", c.hidden_size / c.num_attention_heads);
  c.max_position_embeddings = r.opt_int("max_position_embeddings", 2048);
  c.rms_norm_eps = float(r.opt_num("rms_norm_eps", 1e-6));
  parse_rope(r, c);
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings", false);
  c.attention_bias = c.arch == Architecture::qwen2;
  c.qk_norm = c.arch == Architecture::qwen3 || c.arch == Architecture::qwen3_moe;
  parse_experts(r, c);
  const std::vector<int> bos = parse_token_ids(r, "bos_token_id");
  c.bos_token_id = bos.empty() ? -1 : bos[0];
  c.eos_token_ids = parse_token_ids(r, "eos_token_id");
  c.torch_dtype = r.has("torch_dtype") ? r.opt_string("torch_dtype", "bfloat16") : r.opt_string("dtype", "bfloat16");
  refuse_unsupported(r, c);
  try {
    c.validate();
  } catch (const UserError& e) {
    throw UserError(cat(path, ": ", e.what()));
  }
  return c;
}

std::string model_config_to_hf_json(const ModelConfig& c) {
  json j;
  j["architectures"] = json::array({architecture_hf_name(c.arch)});
  j["model_type"] = architecture_model_type(c.arch);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = double(c.rms_norm_eps);
  j["hidden_act"] = "silu";
  j["initializer_range"] = 0.02;
  j["attention_dropout"] = 0.0;
  j["use_cache"] = true;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["rope_theta"] = double(c.rope.theta);
  // Both spellings of the RoPE settings: classic readers take rope_theta/rope_scaling, newer ones rope_parameters.
  json params = {{"rope_theta", double(c.rope.theta)}, {"rope_type", "default"}};
  if (c.rope.llama3) {
    json s = {{"rope_type", "llama3"},
              {"factor", double(c.rope.factor)},
              {"low_freq_factor", double(c.rope.low_freq_factor)},
              {"high_freq_factor", double(c.rope.high_freq_factor)},
              {"original_max_position_embeddings", c.rope.original_max_position_embeddings}};
    j["rope_scaling"] = s;
    params.update(s);
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["rope_parameters"] = params;
  switch (c.arch) {
    case Architecture::llama:
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["pretraining_tp"] = 1;
      break;
    case Architecture::qwen2:
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.num_hidden_layers;
      break;
    case Architecture::qwen3:
      j["attention_bias"] = false;
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      j["max_window_layers"] = c.num_hidden_layers;
      break;
    case Architecture::qwen3_moe:
      j["attention_bias"] = false;
      j["use_sliding_window"] = false;
      j["sliding_window"] = nullptr;
      // Both spellings of the expert count, as for RoPE: num_experts for classic readers, num_local_experts for
      // transformers 5 (whose attribute map reads either).
      j["num_experts"] = c.num_experts;
      j["num_local_experts"] = c.num_experts;
      j["num_experts_per_tok"] = c.num_experts_per_tok;
      j["moe_intermediate_size"] = c.moe_intermediate_size;
      j["norm_topk_prob"] = c.norm_topk_prob;
      j["decoder_sparse_step"] = c.decoder_sparse_step;
      j["mlp_only_layers"] = c.mlp_only_layers;
      j["router_aux_loss_coef"] = double(c.router_aux_loss_coef);
      j["output_router_logits"] = false;
      break;
  }
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.empty())
    j["eos_token_id"] = nullptr;
  else if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else
    j["eos_token_id"] = c.eos_token_ids;
  j["torch_dtype"] = c.torch_dtype;
  j["dtype"] = c.torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace hone
