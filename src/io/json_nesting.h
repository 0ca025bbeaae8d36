// How deeply a JSON text nests its arrays and objects, found by one scan before it is parsed. The JSON library
// parses and frees without recursion but copies, prints and compares a value recursively, so a line of 100,000
// `[` (a prompt's extra field, a reward reply, a tokenizer file) overflowed the stack; hone refuses such a text
// before parsing it. No JSON file or line hone reads nests anywhere near the limit.
#pragma once

#include <string>
#include <string_view>

namespace hone {

inline constexpr int kMaxJsonNesting = 256;

// The deepest level of `[` and `{` outside strings (0 for a scalar), counted up to kMaxJsonNesting + 1.
int json_nesting(std::string_view text);

// "" when the text nests at most kMaxJsonNesting levels, else a message (without file or line) saying so.
std::string json_nesting_error(std::string_view text);

// Throws UserError "<what>: <message>" past the limit.
void check_json_nesting(std::string_view text, const std::string& what);

}  // namespace hone
