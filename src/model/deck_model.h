// The model shape a deck describes when it names no model folder: the [model] random-init keys as a ModelConfig,
// read in one place for `hone run`, `hone check` and `hone bench-generation`.
#pragma once

#include "model/model_config.h"

namespace hone {

class Config;

// The deck's random-init shape. vocab_size is model.vocab_size as written (0: the tokenizer's, which the caller
// fills in); the caller validates once the vocabulary is known. A hidden size the heads do not divide (without
// model.head_dim) is a UserError naming the keys.
ModelConfig random_init_model_config(const Config& c);

}  // namespace hone
