// The deck's parallel.tp against the model the deck names, before any rank starts: `hone check` calls it so that a
// tensor-parallel size that does not divide the model is one line naming the deck key, where it is written, the
// dimension it does not divide and the sizes that would, instead of an error once the ranks are up.
#pragma once

#include <string>

namespace hone {

class Config;
struct ModelConfig;

// The model's shape as the deck gives it: the config.json of model.path, or the random-init shape keys. Returns
// false with the reason in *why when model.path's config.json cannot be read (no such folder yet, an unsupported
// config). A random-init model.vocab_size of 0 (the tokenizer's size, known at run time) stays 0: the vocabulary is
// padded to a multiple of tp, so no tp is refused for it.
bool deck_model_shape(const Config& c, ModelConfig* out, std::string* why);

// Checks parallel.tp (and parallel.ep: the experts) against the deck's model (model/layer_shape.h: attention heads,
// intermediate size, KV heads, experts).
// Throws UserError "<where parallel.tp is written>: parallel.tp = 3 does not divide the 16 attention heads ...; tp =
// 1, 2, 4, 8 or 16 would". Returns "" when checked (always at tp = 1), else why the model could not be read: the
// check is then left to `hone run`.
std::string check_tp_fits_model(const Config& c);

}  // namespace hone
