// Gathering a deck's errors into one refusal (config/deck_errors.h).
#include "config/deck_errors.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone {

void DeckErrors::add(const std::string& line) {
  const std::string l = one_line(line);
  if (std::find(lines_.begin(), lines_.end(), l) == lines_.end()) lines_.push_back(l);
}

void DeckErrors::add_for_key(const std::string& key, const std::string& line) {
  refused_keys_.insert(key);
  add(line);
}

void DeckErrors::add_rule(const std::string& line) {
  for (const std::string& k : refused_keys_)
    if (line.find("'" + k + "'") != std::string::npos) return;
  add(line);
}

void DeckErrors::attempt(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    add(e.what());
  }
}

void DeckErrors::throw_if_any() const {
  if (lines_.empty()) return;
  std::string all;
  for (const std::string& l : lines_) all += (all.empty() ? "" : "\nhone: error: ") + l;
  throw UserError(all);
}

}  // namespace hone
