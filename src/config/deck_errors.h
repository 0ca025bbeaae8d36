// The errors of one deck, gathered while it is read, so that a deck with four mistakes is refused once with four
// lines (the file's, in file order; each override's; then the rules between keys) instead of one per rerun.
// A rule broken only because a key it names was refused itself (and kept its default) is left out.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

namespace hone {

class DeckErrors {
 public:
  // One error line (made one line: deck text may hold line breaks); a repeated line is kept once.
  void add(const std::string& line);
  // The error of a key that was refused: rules that name the key are not reported after it.
  void add_for_key(const std::string& key, const std::string& line);
  // A rule between keys: left out when it names ('key') a key refused before.
  void add_rule(const std::string& line);
  // Runs f; a UserError it throws becomes one error line.
  void attempt(const std::function<void()>& f);
  bool empty() const { return lines_.empty(); }
  const std::vector<std::string>& lines() const { return lines_; }
  // Throws UserError with every line ("\nhone: error: " between them, as the error printer starts the first).
  void throw_if_any() const;

  bool syntax = false;  // the file is not TOML (or not a deck hone reads): nothing after it is checked

 private:
  std::vector<std::string> lines_;
  std::set<std::string> refused_keys_;
};

}  // namespace hone
