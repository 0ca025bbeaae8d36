// The model's fp32 parameters in one flat buffer: layout, Hugging Face names, random init, load and save.
//
// Order of parameters (and so of the flat buffer) is the order in which transformers registers them, i.e. what
// model.named_parameters() yields: embed_tokens; per layer q/k/v/o projections (each bias after its weight),
// q_norm, k_norm, gate/up/down, the two layer norms; the final norm; lm_head unless tied.
#include "model/weights.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "model/safetensors.h"
#include "io/atomic_file.h"
#include "runtime/error.h"

namespace hone {

namespace fs = std::filesystem;

namespace {

// Calls fn(hf_name, tensor_slot) for every distinct parameter in order; which optional ones exist is given.
template <class Fn>
void visit_parameters(ModelWeights& w, bool bias, bool qk_norm, bool tied, Fn&& fn) {
  fn("model.embed_tokens.weight", w.embed_tokens);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn(p + "self_attn.q_proj.weight", l.q_proj);
    if (bias) fn(p + "self_attn.q_proj.bias", l.q_bias);
    fn(p + "self_attn.k_proj.weight", l.k_proj);
    if (bias) fn(p + "self_attn.k_proj.bias", l.k_bias);
    fn(p + "self_attn.v_proj.weight", l.v_proj);
    if (bias) fn(p + "self_attn.v_proj.bias", l.v_bias);
    fn(p + "self_attn.o_proj.weight", l.o_proj);
    if (qk_norm) {
      fn(p + "self_attn.q_norm.weight", l.q_norm);
      fn(p + "self_attn.k_norm.weight", l.k_norm);
    }
    fn(p + "mlp.gate_proj.weight", l.gate_proj);
    fn(p + "mlp.up_proj.weight", l.up_proj);
    fn(p + "mlp.down_proj.weight", l.down_proj);
    fn(p + "input_layernorm.weight", l.input_layernorm);
    fn(p + "post_attention_layernorm.weight", l.post_attention_layernorm);
  }
  fn("model.norm.weight", w.norm);
  if (!tied) fn("lm_head.weight", w.lm_head);
}

bool is_tied(const ModelWeights& w) {
  return w.lm_head.defined() && w.lm_head.data() == w.embed_tokens.data();
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> ModelWeights::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (!embed_tokens.defined()) return out;
  const bool bias = !layers.empty() && layers[0].q_bias.defined();
  const bool qk_norm = !layers.empty() && layers[0].q_norm.defined();
  // visit_parameters only reads through the slots here.
  visit_parameters(const_cast<ModelWeights&>(*this), bias, qk_norm, is_tied(*this),
                   [&](const std::string& name, Tensor& t) { out.emplace_back(name, t); });
  return out;
}

ModelWeights allocate_weights(const ModelConfig& c) {
  c.validate();
  const int64_t V = c.vocab_size, C = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  ModelWeights w;
  auto shape_only = [](std::vector<int64_t> s) { return Tensor::view(nullptr, std::move(s), DType::f32); };
  w.embed_tokens = shape_only({V, C});
  w.layers.resize(size_t(c.num_hidden_layers));
  for (LayerWeights& l : w.layers) {
    l.input_layernorm = shape_only({C});
    l.q_proj = shape_only({q, C});
    l.k_proj = shape_only({kv, C});
    l.v_proj = shape_only({kv, C});
    if (c.attention_bias) {
      l.q_bias = shape_only({q});
      l.k_bias = shape_only({kv});
      l.v_bias = shape_only({kv});
    }
    if (c.qk_norm) {
      l.q_norm = shape_only({D});
      l.k_norm = shape_only({D});
    }
    l.o_proj = shape_only({C, q});
    l.post_attention_layernorm = shape_only({C});
    l.gate_proj = shape_only({I, C});
    l.up_proj = shape_only({I, C});
    l.down_proj = shape_only({C, I});
  }
  w.norm = shape_only({C});
  if (!c.tie_word_embeddings) w.lm_head = shape_only({V, C});

  int64_t total = 0;
  visit_parameters(w, c.attention_bias, c.qk_norm, c.tie_word_embeddings,
                   [&](const std::string&, Tensor& t) { total += t.numel(); });
  HONE_CHECK(total == c.num_parameters(), "parameter count ", total, " differs from num_parameters() ",
             c.num_parameters());
  w.flat = Tensor::zeros({total}, DType::f32);
  int64_t offset = 0;
  visit_parameters(w, c.attention_bias, c.qk_norm, c.tie_word_embeddings, [&](const std::string&, Tensor& t) {
    t = Tensor::view(w.flat.f32() + offset, t.shape(), DType::f32);
    offset += t.numel();
  });
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  return w;
}

void init_random_weights(ModelWeights& w, const ModelConfig& c, uint64_t seed, float std) {
  (void)c;  // the layout is in `w`; the config is part of the signature for symmetry with load_weights
  const uint64_t base = splitmix64(seed);
  for (auto& [name, t] : w.named_parameters()) {
    float* p = t.f32();
    const int64_t n = t.numel();
    if (ends_with(name, "norm.weight")) {
      for (int64_t i = 0; i < n; ++i) p[i] = 1.f;
      continue;
    }
    if (ends_with(name, ".bias")) {
      for (int64_t i = 0; i < n; ++i) p[i] = 0.f;
      continue;
    }
    // Counter-based: element i of a parameter depends only on (seed, name, i), not on threads or layout.
    const uint64_t key = splitmix64(base ^ fnv1a(name));
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t a = splitmix64(key + 2 * uint64_t(i)), b = splitmix64(key + 2 * uint64_t(i) + 1);
      const double u1 = (double((a >> 11) + 1)) * 0x1.0p-53;  // (0, 1]
      const double u2 = double(b >> 11) * 0x1.0p-53;          // [0, 1)
      p[i] = float(double(std) * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  }
}

void load_weights(ModelWeights& w, const ModelConfig& c, const std::string& dir) {
  if (!w.flat.defined()) w = allocate_weights(c);
  const SafetensorsCheckpoint ckpt(dir);
  const auto params = w.named_parameters();
  std::set<std::string> expected;
  std::vector<std::string> missing;
  for (const auto& [name, t] : params) {
    expected.insert(name);
    if (!ckpt.contains(name)) missing.push_back(name);
  }
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
    if (names.size() > 8) s += cat(", ... (", names.size(), " in all)");
    return s;
  };
  HONE_USER_CHECK(missing.empty(), dir, ": the checkpoint lacks ", missing.size(), " tensor(s) the ",
                  architecture_hf_name(c.arch), " config needs: ", list(missing));
  std::vector<std::string> extra;
  for (const std::string& name : ckpt.names()) {
    if (expected.count(name)) continue;
    if (name == "lm_head.weight" && c.tie_word_embeddings) continue;  // some tied checkpoints store the copy too
    if (ends_with(name, "rotary_emb.inv_freq")) continue;            // a buffer older exports included
    extra.push_back(name);
  }
  HONE_USER_CHECK(extra.empty(), dir, ": the checkpoint has ", extra.size(), " tensor(s) the ",
                  architecture_hf_name(c.arch), " config does not use: ", list(extra));
  for (const auto& [name, t] : params) {
    const SafetensorsTensorInfo& info = ckpt.info(name);
    HONE_USER_CHECK(info.shape == t.shape(), dir, ": tensor '", name, "' has shape ",
                    Tensor::view(nullptr, info.shape, DType::f32).shape_string(), " but the config needs ",
                    t.shape_string());
    HONE_USER_CHECK(info.dtype_name == "F32" || info.dtype_name == "BF16" || info.dtype_name == "F16", dir,
                    ": tensor '", name, "' has dtype ", info.dtype_name, "; expected F32, BF16 or F16");
    ckpt.read_f32(name, t.f32());
  }
}

void save_model(const ModelWeights& w, const ModelConfig& c, const std::string& dir, DType dtype,
                int64_t max_shard_bytes) {
  HONE_USER_CHECK(dtype == DType::f32 || dtype == DType::bf16, "models are saved in f32 or bf16, not ",
                  dtype_name(dtype));
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, t] : w.named_parameters()) entries.push_back({name, t, dtype});
  std::error_code ec;
  fs::create_directories(dir, ec);
  HONE_USER_CHECK(fs::is_directory(dir), "cannot create folder ", dir, ": ", ec.message());
  write_safetensors_checkpoint(dir, entries, max_shard_bytes);
  ModelConfig saved = c;
  saved.torch_dtype = dtype == DType::bf16 ? "bfloat16" : "float32";
  write_file_atomic(dir + "/config.json", model_config_to_hf_json(saved));
}

}  // namespace hone
