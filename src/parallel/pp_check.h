// The deck's pipeline split (parallel.pp, parallel.vpp, parallel.pp_layers) and generation layout (generation.tp)
// against the model the deck names, before any rank starts: `hone check` and `hone run` call it so that a split the
// model's layers do not allow, or a generation tensor-parallel size that does not divide its heads, is one line
// naming the deck key and where it is written.
#pragma once

#include <string>

#include "parallel/pipeline_layout.h"

namespace hone {

class Config;

// The pipeline layout the deck asks for over a model of num_layers layers (UserError of PipelineLayout::of, prefixed
// with where parallel.pp_layers, parallel.vpp or parallel.pp is written).
PipelineLayout deck_pipeline_layout(const Config& c, int num_layers);

// generation.tp resolved: the deck's value, or parallel.tp when it is 0.
int deck_generation_tp(const Config& c);

// Checks the pipeline split and generation.tp against the deck's model (tp_check.h's deck_model_shape). Returns ""
// when checked, else why the model could not be read (the check is then left to `hone run`).
std::string check_pipeline_fits_model(const Config& c);

}  // namespace hone
