// parallel.tp checked against the deck's model at `hone check` time (see the header).
#include "parallel/tp_check.h"

#include <filesystem>

#include "config/config.h"
#include "model/deck_model.h"
#include "model/gguf_file.h"
#include "model/gguf_import.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/model_source.h"
#include "runtime/error.h"

namespace hone {
namespace fs = std::filesystem;

bool deck_model_shape(const Config& c, ModelConfig* out, std::string* why) {
  const std::string path = c.get_string("model.path");
  if (path.empty()) {
    *out = random_init_model_config(c);
    return true;
  }
  if (is_gguf_path(path)) {
    try {
      *out = gguf_model_config(gguf::GgufFile(path));
    } catch (const UserError& e) {
      *why = e.what();
      return false;
    }
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
  const int tp = int(c.get_int("parallel.tp")), ep = int(c.get_int("parallel.ep"));
  if (tp == 1 && ep == 1) return {};
  ModelConfig m;
  std::string why;
  if (!deck_model_shape(c, &m, &why)) return why;
  const std::string path = c.get_string("model.path");
  const std::string model = path.empty() ? std::string(" (the deck's random-init shape)")
                                         : cat(" (the model of ", (fs::path(path) / "config.json").string(), ")");
  try {
    layer_shape(m, tp, 0);
  } catch (const UserError& e) {
    throw UserError(cat(key_location(c, "parallel.tp"), ": ", e.what(), model));
  }
  try {
    layer_shape(m, tp, 0, ep, 0);
  } catch (const UserError& e) {
    throw UserError(cat(key_location(c, "parallel.ep"), ": ", e.what(), model));
  }
  return {};
}

}  // namespace hone
