// A cheap scan of TOML text before TOML++ sees it, refusing with a one-line error what TOML++ would not survive:
//   * depth: TOML++ parses dotted keys and nested arrays/inline tables recursively, so a key like [a.a.a...] with
//     tens of thousands of parts overflows the stack (a crash, not an error). Decks nest two levels (section.key);
//     the scan refuses anything far deeper;
//   * characters outside ASCII where TOML allows none (outside strings and comments), and right after a
//     line-ending backslash of a multi-line string: TOML++ 3.3 asks whether such a character is whitespace, and
//     for most of them its table reaches an unreachable branch (undefined behaviour; hone compiles TOML++ in).
#pragma once

#include <string>

namespace hone {

constexpr int kMaxTomlKeyParts = 64;  // parts of one dotted key: [a.b.c] has 3
constexpr int kMaxTomlNesting = 64;   // arrays and inline tables inside each other

// "" when TOML++ may parse text, else "<line>:<column>: <what>" (1-based, columns in bytes).
std::string toml_guard_problem(const std::string& text);

}  // namespace hone
