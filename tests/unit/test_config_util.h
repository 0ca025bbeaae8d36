// Helpers shared by the deck tests (tests/unit/test_config_*.cpp).
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "runtime/error.h"

namespace test {

// The smallest valid decks: a checkpoint with a JSONL dataset, and a random-init model on a synthetic task.
inline const char* kCheckpointDeck = "[model]\npath = \"models/m\"\n[data]\npath = \"data/x.jsonl\"\n";
inline const char* kRandomInitDeck =
    "[model]\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\nnum_attention_heads = 4\n"
    "[tokenizer]\nkind = \"chars\"\n[data]\ntask = \"arithmetic\"\n";

// The message of the UserError that loading this deck text (named deck.toml) throws, or "(no error)".
inline std::string deck_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    hone::load_config_from_string(text, "deck.toml", overrides);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace test
