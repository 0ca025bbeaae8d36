// The model's fp32 parameters in one flat buffer: layout, Hugging Face names, random init, load and save.
//
// Order of parameters (and so of the flat buffer): the parameter table's (model/param_table.h).
#include "model/weights.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "model/safetensors.h"
#include "io/atomic_file.h"
#include "runtime/error.h"

namespace hone {

LayerParams<const float*> layer_pointers(const LayerWeights& w) {
  LayerParams<const float*> p;
  for (int i = 0; i < kNumLayerParams; ++i) {
    const Tensor& t = w[LayerParam(i)];
    p[LayerParam(i)] = t.defined() ? t.f32() : nullptr;
  }
  return p;
}

LayerParams<float*> layer_grad_pointers(const LayerWeights& g) {
  LayerParams<float*> p;
  for (int i = 0; i < kNumLayerParams; ++i) {
    const Tensor& t = g[LayerParam(i)];
    p[LayerParam(i)] = t.defined() ? t.f32() : nullptr;
  }
  return p;
}

ParamLayout param_layout_of(const ModelWeights& w) {
  ParamLayout l;
  l.num_params = l.num_dense_params = w.flat.numel();
  const float* base = w.flat.defined() ? w.flat.f32() : nullptr;
  auto offset = [&](const Tensor& t) -> int64_t {
    if (!t.defined()) return -1;
    const int64_t off = t.f32() - base;
    HONE_CHECK(base && off >= 0 && off + t.numel() <= l.num_params, "a weight tensor lies outside the flat buffer");
    return off;
  };
  l.embed_tokens = offset(w.embed_tokens);
  l.norm = offset(w.norm);
  l.lm_head = offset(w.lm_head);
  l.layers.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i)
    for (int p = 0; p < kNumLayerParams; ++p) l.layers[i][LayerParam(p)] = offset(w.layers[i][LayerParam(p)]);
  return l;
}

namespace fs = std::filesystem;

namespace {

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

namespace {

Tensor& member(ModelWeights& w, const ParamSpec& spec) {
  if (spec.layer >= 0) return w.layers[size_t(spec.layer)][spec.param];
  switch (spec.global) {
    case GlobalParam::embed_tokens: return w.embed_tokens;
    case GlobalParam::norm: return w.norm;
    case GlobalParam::lm_head: return w.lm_head;
  }
  HONE_CHECK(false, "unknown global parameter ", int(spec.global));
  return w.norm;
}

}  // namespace

Tensor ModelWeights::param(const ParamSpec& spec) const {
  const Tensor& m = member(const_cast<ModelWeights&>(*this), spec);
  if (spec.expert < 0) return m;
  HONE_CHECK(m.defined() && m.shape().size() == 3, spec.name, ": the layer's experts are not bound");
  const int64_t e = spec.expert - expert_begin, rows = m.shape()[1], cols = m.shape()[2];
  HONE_CHECK(e >= 0 && e < m.shape()[0], spec.name, ": expert ", spec.expert, " is not among this rank's ",
             m.shape()[0], " from ", expert_begin);
  return Tensor::view(m.f32() + e * rows * cols, {rows, cols}, DType::f32);
}

void ModelWeights::bind(const ParamSpec& spec, float* data, int experts) {
  Tensor& m = member(*this, spec);
  if (spec.expert < 0) {
    m = Tensor::view(data, spec.shape, DType::f32);
    return;
  }
  if (m.defined()) return;  // bound by the layer's first expert
  expert_begin = spec.expert;
  m = Tensor::view(data, {experts, spec.shape[0], spec.shape[1]}, DType::f32);
}

std::vector<std::pair<std::string, Tensor>> ModelWeights::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(specs.size());
  for (const ParamSpec& spec : specs) out.emplace_back(spec.name, param(spec));
  return out;
}

ModelWeights allocate_weights(const ModelConfig& c) {
  c.validate();
  ModelWeights w;
  w.specs = param_table(c);
  w.layers.resize(size_t(c.num_hidden_layers));
  int64_t total = 0;
  for (const ParamSpec& spec : w.specs) total += spec.numel();
  w.flat = Tensor::zeros({total}, DType::f32);
  int64_t offset = 0;
  for (const ParamSpec& spec : w.specs) {
    w.bind(spec, w.flat.f32() + offset, c.num_experts);
    offset += spec.numel();
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  return w;
}

void init_random_weights(ModelWeights& w, const ModelConfig& c, uint64_t seed, float std) {
  (void)c;  // the layout is in `w`; the config is part of the signature for symmetry with load_weights
  const uint64_t base = splitmix64(seed);
  for (const ParamSpec& spec : w.specs) {
    float* p = w.param(spec).f32();
    const int64_t n = spec.numel();
    if (spec.init != ParamInit::normal) {
      const float v = spec.init == ParamInit::ones ? 1.f : 0.f;
      for (int64_t i = 0; i < n; ++i) p[i] = v;
      continue;
    }
    // Counter-based: element i of a parameter depends only on (seed, name, i), not on threads or layout.
    const uint64_t key = splitmix64(base ^ fnv1a(spec.name));
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t a = splitmix64(key + 2 * uint64_t(i)), b = splitmix64(key + 2 * uint64_t(i) + 1);
      const double u1 = (double((a >> 11) + 1)) * 0x1.0p-53;  // (0, 1]
      const double u2 = double(b >> 11) * 0x1.0p-53;          // [0, 1)
      p[i] = float(double(std) * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  }
}

void check_checkpoint_params(const SafetensorsCheckpoint& ckpt, const std::vector<ParamSpec>& specs,
                             const ModelConfig& c, const std::string& dir) {
  std::set<std::string> expected;
  std::vector<std::string> missing;
  for (const ParamSpec& spec : specs) {
    expected.insert(spec.name);
    if (!ckpt.contains(spec.name)) missing.push_back(spec.name);
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
  for (const ParamSpec& spec : specs) {
    const SafetensorsTensorInfo& info = ckpt.info(spec.name);
    HONE_USER_CHECK(info.shape == spec.shape, dir, ": tensor '", spec.name, "' has shape ",
                    Tensor::view(nullptr, info.shape, DType::f32).shape_string(), " but the config needs ",
                    Tensor::view(nullptr, spec.shape, DType::f32).shape_string());
    HONE_USER_CHECK(info.dtype_name == "F32" || info.dtype_name == "BF16" || info.dtype_name == "F16", dir,
                    ": tensor '", spec.name, "' has dtype ", info.dtype_name, "; expected F32, BF16 or F16");
  }
}

void load_weights(ModelWeights& w, const ModelConfig& c, const std::string& dir) {
  if (!w.flat.defined()) w = allocate_weights(c);
  const SafetensorsCheckpoint ckpt(dir);
  check_checkpoint_params(ckpt, w.specs, c, dir);
  for (const ParamSpec& spec : w.specs) ckpt.read_f32(spec.name, w.param(spec).f32());
}

void save_model(const ModelWeights& w, const ModelConfig& c, const std::string& dir, DType dtype,
                int64_t max_shard_bytes) {
  save_model_streaming(w.specs, c, dir, dtype, max_shard_bytes, [&](size_t i) { return w.param(w.specs[i]); });
}

void save_model_streaming(const std::vector<ParamSpec>& specs, const ModelConfig& c, const std::string& dir,
                          DType dtype, int64_t max_shard_bytes, const std::function<Tensor(size_t)>& tensor_of) {
  HONE_USER_CHECK(dtype == DType::f32 || dtype == DType::bf16, "models are saved in f32 or bf16, not ",
                  dtype_name(dtype));
  std::vector<SafetensorsSlot> slots;
  for (const ParamSpec& spec : specs) slots.push_back({spec.name, spec.shape, dtype});
  SafetensorsCheckpointWriter out(dir, std::move(slots), max_shard_bytes);  // creates the folder
  for (size_t i = 0; i < specs.size(); ++i) out.write(tensor_of(i));
  out.finish();
  ModelConfig saved = c;
  saved.torch_dtype = dtype == DType::bf16 ? "bfloat16" : "float32";
  write_file_atomic(dir + "/config.json", model_config_to_hf_json(saved));
}

}  // namespace hone
