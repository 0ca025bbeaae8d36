// GGUF metadata and tensors to a Hugging Face model (see gguf_import.h). The names follow llama.cpp's tensor map
// (token_embd, blk.N.attn_q, ...) and its writer's conventions: dimensions stored fastest first, and for the llama
// family the rows of q and k permuted per head from rotate-half order (HF) to interleaved pairs.
#include "model/gguf_import.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "io/atomic_file.h"
#include "model/gguf_file.h"
#include "model/hf_folder.h"
#include "model/param_table.h"
#include "model/weights.h"
#include "runtime/error.h"
#include "tensor/tensor.h"
#include "tokenizer/gguf_tokenizer.h"

namespace hone {

namespace fs = std::filesystem;
using gguf::GgufFile;
using gguf::TensorInfo;

namespace {

// The GGUF name of a layer parameter after "blk.N.".
const char* gguf_layer_suffix(LayerParam p) {
  switch (p) {
    case LayerParam::q_proj: return "attn_q.weight";
    case LayerParam::q_bias: return "attn_q.bias";
    case LayerParam::k_proj: return "attn_k.weight";
    case LayerParam::k_bias: return "attn_k.bias";
    case LayerParam::v_proj: return "attn_v.weight";
    case LayerParam::v_bias: return "attn_v.bias";
    case LayerParam::o_proj: return "attn_output.weight";
    case LayerParam::q_norm: return "attn_q_norm.weight";
    case LayerParam::k_norm: return "attn_k_norm.weight";
    case LayerParam::router: return "ffn_gate_inp.weight";
    case LayerParam::gate_proj: return "ffn_gate.weight";
    case LayerParam::up_proj: return "ffn_up.weight";
    case LayerParam::down_proj: return "ffn_down.weight";
    case LayerParam::input_layernorm: return "attn_norm.weight";
    case LayerParam::post_attention_layernorm: return "ffn_norm.weight";
    case LayerParam::expert_gate: return "ffn_gate_exps.weight";
    case LayerParam::expert_up: return "ffn_up_exps.weight";
    case LayerParam::expert_down: return "ffn_down_exps.weight";
  }
  return "";
}

std::string gguf_name(const ParamSpec& s) {
  if (s.layer < 0) {
    switch (s.global) {
      case GlobalParam::embed_tokens: return "token_embd.weight";
      case GlobalParam::norm: return "output_norm.weight";
      case GlobalParam::lm_head: return "output.weight";
    }
  }
  return cat("blk.", s.layer, ".", gguf_layer_suffix(s.param));
}

// The tensor's shape as Hugging Face writes it (slowest dimension first).
std::vector<int64_t> hf_shape(const TensorInfo& t) {
  std::vector<int64_t> s;
  for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) s.push_back(static_cast<int64_t>(*it));
  return s;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? ", " : "", s[i]);
  return out + "]";
}

struct Reader {
  const GgufFile& f;
  std::string arch;
  std::string key(const char* k) const { return cat(arch, ".", k); }
  int req_int(const char* k) const {
    const std::optional<int64_t> v = f.find_int(key(k));
    HONE_USER_CHECK(v, f.name(), ": metadata key ", key(k), " is missing");
    HONE_USER_CHECK(*v > 0 && *v <= (int64_t(1) << 30), f.name(), ": ", key(k), " = ", *v, " is out of range");
    return static_cast<int>(*v);
  }
  int opt_int(const char* k, int fallback) const { return f.has(key(k)) ? req_int(k) : fallback; }
  double opt_float(const char* k, double fallback) const {
    const std::optional<double> v = f.find_float(key(k));
    return v ? *v : fallback;
  }
};

// Llama 3's frequency scaling is stored as a tensor of per-frequency factors (rope_freqs.weight), not as its four
// parameters. The parameters every published Llama 3.x uses (low 1, high 4, 8192 original positions) are checked
// against the tensor with the factor it holds at the lowest frequencies; any other tensor is refused.
void read_llama3_rope(const Reader& r, const TensorInfo& t, ModelConfig& c) {
  const GgufFile& f = r.f;
  const std::vector<float> factors = f.read_f32(t);
  HONE_USER_CHECK(factors.size() == size_t(c.head_dim / 2), f.name(), ": rope_freqs.weight has ", factors.size(),
                  " values; head dimension ", c.head_dim, " needs ", c.head_dim / 2);
  RopeParams p = c.rope;
  p.llama3 = true;
  p.factor = *std::max_element(factors.begin(), factors.end());
  p.low_freq_factor = 1.f;
  p.high_freq_factor = 4.f;
  p.original_max_position_embeddings = 8192;
  if (const auto orig = f.find_int(r.key("rope.scaling.original_context_length")))
    p.original_max_position_embeddings = static_cast<int>(*orig);
  const double low_wavelen = p.original_max_position_embeddings / p.low_freq_factor;
  const double high_wavelen = p.original_max_position_embeddings / p.high_freq_factor;
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq = std::pow(double(p.theta), -2.0 * double(i) / c.head_dim);
    const double wavelen = 2 * M_PI / freq;
    double expect;
    if (wavelen < high_wavelen) expect = 1;
    else if (wavelen > low_wavelen) expect = p.factor;
    else {
      const double smooth = (p.original_max_position_embeddings / wavelen - p.low_freq_factor) /
                            (p.high_freq_factor - p.low_freq_factor);
      expect = 1 / ((1 - smooth) / p.factor + smooth);
    }
    HONE_USER_CHECK(std::fabs(expect - factors[i]) <= 1e-4 * std::fabs(expect), f.name(),
                    ": rope_freqs.weight is not Llama 3's frequency scaling (factor ", i, " is ", factors[i],
                    ", expected ", expect, "); other RoPE scalings are not supported");
  }
  c.rope = p;
}

// A tensor's values in Hugging Face's layout: the llama family's q and k rows back from interleaved pairs to
// rotate-half order (llama.cpp's converter permutes them per head; qwen files are written unpermuted).
void unpermute_rows(std::vector<float>& w, int64_t rows, int64_t cols, int heads) {
  const int64_t d = rows / heads, half = d / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) {
        const float* src = w.data() + (h * d + 2 * i + j) * cols;
        std::memcpy(out.data() + (h * d + j * half + i) * cols, src, size_t(cols) * sizeof(float));
      }
  w.swap(out);
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::optional<std::string> arch_name = f.find_string("general.architecture");
  HONE_USER_CHECK(arch_name, f.name(), ": no general.architecture in the metadata (not a model file?)");
  const std::string& arch = *arch_name;
  ModelConfig c;
  if (arch == "llama") c.arch = Architecture::llama;
  else if (arch == "qwen2") c.arch = Architecture::qwen2;
  else if (arch == "qwen3") c.arch = Architecture::qwen3;
  else if (arch == "qwen3moe") c.arch = Architecture::qwen3_moe;
  else throw UserError(cat(f.name(), ": architecture '", arch, "' is not supported (supported: llama, qwen2, qwen3, qwen3moe)"));
  const Reader r{f, arch};

  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  HONE_USER_CHECK(embd && embd->ne.size() == 2, f.name(), ": no 2-D token_embd.weight tensor");
  c.hidden_size = r.req_int("embedding_length");
  c.vocab_size = static_cast<int>(embd->ne[1]);
  if (f.has(r.key("vocab_size")))
    HONE_USER_CHECK(r.req_int("vocab_size") == c.vocab_size, f.name(), ": ", r.key("vocab_size"), " = ",
                    r.req_int("vocab_size"), " but token_embd.weight has ", c.vocab_size, " rows");
  c.num_hidden_layers = r.req_int("block_count");
  c.num_attention_heads = r.req_int("attention.head_count");
  c.num_key_value_heads = r.opt_int("attention.head_count_kv", c.num_attention_heads);
  c.head_dim = r.opt_int("attention.key_length", c.hidden_size / c.num_attention_heads);
  HONE_USER_CHECK(r.opt_int("attention.value_length", c.head_dim) == c.head_dim, f.name(), ": ",
                  r.key("attention.value_length"), " differs from the key length ", c.head_dim, " (not supported)");
  c.max_position_embeddings = r.opt_int("context_length", 2048);
  c.rms_norm_eps = float(r.opt_float("attention.layer_norm_rms_epsilon", 1e-6));
  c.rope.theta = float(r.opt_float("rope.freq_base", 10000.0));
  c.rope.head_dim = c.head_dim;
  HONE_USER_CHECK(r.opt_int("rope.dimension_count", c.head_dim) == c.head_dim, f.name(), ": ",
                  r.key("rope.dimension_count"), " = ", r.opt_int("rope.dimension_count", 0),
                  " rotates part of the head (", c.head_dim, "): partial RoPE is not supported");
  if (const auto scaling = f.find_string(r.key("rope.scaling.type")))
    HONE_USER_CHECK(*scaling == "none", f.name(), ": ", r.key("rope.scaling.type"), " = '", *scaling,
                    "' is not supported (Llama 3's scaling, stored as rope_freqs.weight, is)");
  if (const auto window = f.find_int(r.key("attention.sliding_window")))
    HONE_USER_CHECK(*window <= 0 || *window >= c.max_position_embeddings, f.name(), ": ",
                    r.key("attention.sliding_window"), " = ", *window, ": sliding-window attention is not supported");
  if (const TensorInfo* freqs = f.find_tensor("rope_freqs.weight")) read_llama3_rope(r, *freqs, c);

  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = c.arch == Architecture::qwen2;
  c.qk_norm = c.arch == Architecture::qwen3 || c.arch == Architecture::qwen3_moe;
  if (c.arch == Architecture::qwen3_moe) {
    c.num_experts = r.req_int("expert_count");
    c.num_experts_per_tok = r.req_int("expert_used_count");
    c.moe_intermediate_size = r.req_int("expert_feed_forward_length");
    HONE_USER_CHECK(!f.has(r.key("expert_shared_count")) || r.req_int("expert_shared_count") == 0, f.name(),
                    ": shared experts are not supported");
    c.intermediate_size = r.opt_int("feed_forward_length", c.moe_intermediate_size);
    c.norm_topk_prob = true;  // what llama.cpp assumes for qwen3moe and Qwen3-MoE's published configs say
    c.decoder_sparse_step = 1;
    c.router_aux_loss_coef = 0.001f;
  } else {
    c.intermediate_size = r.req_int("feed_forward_length");
  }
  if (const auto bos = f.find_int("tokenizer.ggml.bos_token_id")) c.bos_token_id = static_cast<int>(*bos);
  if (const auto eos = f.find_int("tokenizer.ggml.eos_token_id")) c.eos_token_ids.push_back(static_cast<int>(*eos));
  if (const auto eot = f.find_int("tokenizer.ggml.eot_token_id"))
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), int(*eot)) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(static_cast<int>(*eot));
  c.torch_dtype = "bfloat16";
  try {
    c.validate();
  } catch (const UserError& e) {
    throw UserError(cat(f.name(), ": ", e.what()));
  }

  // Every tensor of the file is one the config uses (a fused or unknown tensor would otherwise be dropped).
  std::set<std::string> used = {"rope_freqs.weight"};
  for (const ParamSpec& s : param_table(c)) used.insert(gguf_name(s));
  for (const TensorInfo& t : f.tensors())
    HONE_USER_CHECK(used.count(t.name), f.name(), ": tensor ", t.name, " has no place in a ", architecture_hf_name(c.arch),
                    " model of this shape (not supported)");
  return c;
}

namespace {

tok::GgufVocab gguf_vocab(const GgufFile& f) {
  tok::GgufVocab v;
  const std::optional<std::string> model = f.find_string("tokenizer.ggml.model");
  HONE_USER_CHECK(model, f.name(), ": no tokenizer.ggml.model in the metadata (the file has no tokenizer)");
  v.model = *model;
  v.pre = f.find_string("tokenizer.ggml.pre").value_or("");
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(static_cast<int32_t>(t));
  if (f.has("tokenizer.ggml.scores")) v.scores = f.get_float_array("tokenizer.ggml.scores");
  if (f.has("tokenizer.ggml.merges")) v.merges = f.get_string_array("tokenizer.ggml.merges");
  auto id = [&](const char* key) -> int32_t {
    const std::optional<int64_t> x = f.find_int(key);
    if (!x) return -1;
    HONE_USER_CHECK(*x >= 0 && *x < int64_t(v.tokens.size()), f.name(), ": ", key, " = ", *x,
                    " is not a token id (", v.tokens.size(), " tokens)");
    return static_cast<int32_t>(*x);
  };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.pad = id("tokenizer.ggml.padding_token_id");
  v.eot = id("tokenizer.ggml.eot_token_id");
  v.add_bos = f.find_bool("tokenizer.ggml.add_bos_token");
  v.add_eos = f.find_bool("tokenizer.ggml.add_eos_token");
  v.add_space_prefix = f.find_bool("tokenizer.ggml.add_space_prefix");
  v.chat_template = f.find_string("tokenizer.chat_template").value_or("");
  return v;
}

}  // namespace

void write_hf_folder_from_gguf(const GgufFile& f, const std::string& dir, DType dtype) {
  const ModelConfig c = gguf_model_config(f);
  const tok::GgufVocab vocab = gguf_vocab(f);
  HONE_USER_CHECK(vocab.tokens.size() <= size_t(c.vocab_size), f.name(), ": the tokenizer has ", vocab.tokens.size(),
                  " tokens but token_embd.weight only ", c.vocab_size, " rows");
  const tok::TokenizerFiles tok_files = tok::tokenizer_files_from_gguf(vocab);
  std::error_code ec;
  fs::create_directories(dir, ec);
  HONE_USER_CHECK(!ec, "cannot create ", dir, ": ", ec.message());

  const std::vector<ParamSpec> specs = param_table(c);
  // The experts of a layer are one GGUF tensor [E, rows, cols]: dequantized once, sliced per expert.
  std::string held_name;
  std::vector<float> held;
  Tensor out;
  save_model_streaming(specs, c, dir, dtype, int64_t(5) << 30, [&](size_t i) -> Tensor {
    const ParamSpec& s = specs[i];
    const std::string name = gguf_name(s);
    const TensorInfo* t = f.find_tensor(name);
    HONE_USER_CHECK(t, f.name(), ": tensor ", name, " (", s.name, ") is missing");
    std::vector<int64_t> want = s.shape;
    if (s.expert >= 0) want.insert(want.begin(), c.num_experts);
    HONE_USER_CHECK(hf_shape(*t) == want, f.name(), ": tensor ", name, " has shape ", shape_text(hf_shape(*t)),
                    "; ", s.name, " needs ", shape_text(want));
    if (held_name != name) {
      held = f.read_f32(*t);
      held_name = name;
      if (c.arch == Architecture::llama && s.layer >= 0 &&
          (s.param == LayerParam::q_proj || s.param == LayerParam::k_proj)) {
        const int heads = s.param == LayerParam::q_proj ? c.num_attention_heads : c.num_key_value_heads;
        unpermute_rows(held, s.shape[0], s.shape[1], heads);
      }
    }
    const int64_t n = s.numel();
    out = Tensor::empty(s.shape);
    std::memcpy(out.data(), held.data() + (s.expert >= 0 ? s.expert * n : 0), size_t(n) * sizeof(float));
    return out;
  });
  write_file_atomic((fs::path(dir) / "tokenizer.json").string(), tok_files.tokenizer_json);
  write_file_atomic((fs::path(dir) / "tokenizer_config.json").string(), tok_files.tokenizer_config_json);
  write_generation_config("", c, -1, dir);
}

}  // namespace hone
