// parallel.tp checked against the deck's model at `hone check` time (see the header).
#include "parallel/tp_check.h"

#include <filesystem>

#include "config/config.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "runtime/error.h"

namespace hone {
namespace fs = std::filesystem;

namespace {

Architecture arch_of(const std::string& s) {
  if (s == "llama") return Architecture::llama;
  if (s == "qwen2") return Architecture::qwen2;
  return Architecture::qwen3;
}

// The random-init shape keys as a ModelConfig; load_config has already checked their combinations.
ModelConfig random_init_shape(const Config& c) {
  ModelConfig m;
  m.arch = arch_of(c.get_string("model.architecture"));
  m.vocab_size = int(c.get_int("model.vocab_size"));
  m.hidden_size = int(c.get_int("model.hidden_size"));
  m.intermediate_size = int(c.get_int("model.intermediate_size"));
  m.num_hidden_layers = int(c.get_int("model.num_layers"));
  m.num_attention_heads = int(c.get_int("model.num_attention_heads"));
  const int64_t kv = c.get_int("model.num_key_value_heads");
  m.num_key_value_heads = int(kv > 0 ? kv : m.num_attention_heads);
  const int64_t hd = c.get_int("model.head_dim");
  m.head_dim = int(hd > 0 ? hd : m.hidden_size / m.num_attention_heads);
  m.max_position_embeddings = int(c.get_int("model.max_position_embeddings"));
  m.rms_norm_eps = float(c.get_float("model.rms_norm_eps"));
  m.rope.head_dim = m.head_dim;
  m.rope.theta = float(c.get_float("model.rope_theta"));
  m.tie_word_embeddings = c.get_bool("model.tie_word_embeddings");
  m.attention_bias = m.arch == Architecture::qwen2;
  m.qk_norm = m.arch == Architecture::qwen3;
  return m;
}

}  // namespace

bool deck_model_shape(const Config& c, ModelConfig* out, std::string* why) {
  const std::string path = c.get_string("model.path");
  if (path.empty()) {
    *out = random_init_shape(c);
    return true;
  }
  if (!fs::exists(fs::path(path) / "config.json")) {
    *why = cat("model.path = \"", path, "\" has no config.json here");
    return false;
  }
  try {
    *out = load_model_config(path);
  } catch (const UserError& e) {
    *why = e.what();
    return false;
  }
  return true;
}

std::string check_tp_fits_model(const Config& c) {
  const int tp = int(c.get_int("parallel.tp"));
  if (tp == 1) return {};
  ModelConfig m;
  std::string why;
  if (!deck_model_shape(c, &m, &why)) return why;
  try {
    layer_shape(m, tp, 0);
  } catch (const UserError& e) {
    const std::string path = c.get_string("model.path");
    throw UserError(cat(key_location(c, "parallel.tp"), ": ", e.what(),
                        path.empty() ? std::string(" (the deck's random-init shape)")
                                     : cat(" (the model of ", (fs::path(path) / "config.json").string(), ")")));
  }
  return {};
}

}  // namespace hone
