// A cheap scan of TOML text before TOML++ sees it: TOML++ parses dotted keys and nested arrays/inline tables
// recursively, so a key like [a.a.a...] with tens of thousands of parts overflows the stack (a crash, not an
// error). Decks nest two levels (section.key); the scan refuses anything far deeper with a one-line error.
#pragma once

#include <string>

namespace hone {

constexpr int kMaxTomlKeyParts = 64;  // parts of one dotted key: [a.b.c] has 3
constexpr int kMaxTomlNesting = 64;   // arrays and inline tables inside each other

// "" when text is shallow enough for TOML++, else "<line>:<column>: <what>" (1-based, columns in bytes).
std::string toml_nesting_problem(const std::string& text);

}  // namespace hone
