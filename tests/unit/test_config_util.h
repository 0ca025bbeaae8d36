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

// Every error line of the UserError that loading this deck text (named deck.toml) throws (a deck's errors come
// together, "\nhone: error: " between them); empty when it loads.
inline std::vector<std::string> deck_errors(const std::string& text, const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> lines;
  try {
    hone::load_config_from_string(text, "deck.toml", overrides);
  } catch (const hone::UserError& e) {
    const std::string all = e.what(), sep = "\nhone: error: ";
    size_t at = 0;
    for (size_t next; (next = all.find(sep, at)) != std::string::npos; at = next + sep.size())
      lines.push_back(all.substr(at, next - at));
    lines.push_back(all.substr(at));
  }
  return lines;
}

// The first error line of loading this deck text (the one the case is about; a test deck that leaves out whole
// sections may have more), or "(no error)".
inline std::string deck_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  const std::vector<std::string> lines = deck_errors(text, overrides);
  return lines.empty() ? "(no error)" : lines.front();
}

}  // namespace test
