// The pipeline split and the generation layout checked against the deck's model (see the header).
#include "parallel/pp_check.h"

#include <filesystem>

#include "config/config.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "parallel/tp_check.h"
#include "runtime/error.h"

namespace hone {
namespace fs = std::filesystem;

namespace {

std::string model_source(const Config& c) {
  const std::string path = c.get_string("model.path");
  return path.empty() ? std::string(" (the deck's random-init shape)")
                      : cat(" (the model of ", (fs::path(path) / "config.json").string(), ")");
}

}  // namespace

PipelineLayout deck_pipeline_layout(const Config& c, int num_layers) {
  const std::vector<int64_t> chunk_layers = c.get_int_list("parallel.pp_layers");
  try {
    return PipelineLayout::of(num_layers, int(c.get_int("parallel.pp")), int(c.get_int("parallel.vpp")),
                              chunk_layers);
  } catch (const UserError& e) {
    const char* key = !chunk_layers.empty() ? "parallel.pp_layers"
                      : c.get_int("parallel.vpp") > 1 ? "parallel.vpp"
                                                       : "parallel.pp";
    throw UserError(cat(key_location(c, key), ": ", e.what()));
  }
}

int deck_generation_tp(const Config& c) {
  const int64_t g = c.get_int("generation.tp");
  return int(g > 0 ? g : c.get_int("parallel.tp"));
}

std::string check_pipeline_fits_model(const Config& c) {
  const bool pipeline = c.get_int("parallel.pp") > 1 || c.get_int("parallel.vpp") > 1 ||
                        !c.get_int_list("parallel.pp_layers").empty();
  const int tg = deck_generation_tp(c);
  if (!pipeline && tg == c.get_int("parallel.tp")) return {};
  ModelConfig m;
  std::string why;
  if (!deck_model_shape(c, &m, &why)) return why;
  if (pipeline) {
    try {
      deck_pipeline_layout(c, m.num_hidden_layers);
    } catch (const UserError& e) {
      throw UserError(cat(e.what(), model_source(c)));
    }
  }
  try {
    layer_shape(m, tg, 0);
  } catch (const UserError& e) {
    // layer_shape names parallel.tp: here the size is the generation replica's.
    std::string msg = e.what();
    for (size_t at; (at = msg.find("parallel.tp")) != std::string::npos;) msg.replace(at, 11, "generation.tp");
    throw UserError(cat(key_location(c, "generation.tp"), ": ", msg, model_source(c)));
  }
  return {};
}

}  // namespace hone
