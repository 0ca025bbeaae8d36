// Splits a chat template into text and tag tokens the way jinja2's lexer does with the options transformers uses
// (trim_blocks, lstrip_blocks, no trailing newline kept): the whitespace rules decide most of a template's bytes.
#pragma once

#include <string>
#include <vector>

namespace hone::jinja {

struct Token {
  enum class Type { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End };
  Type type;
  std::string text;  // Text: the data; String: the unescaped value; Name/Int/Float/Op: as written
  int line = 0;
};

// Throws TemplateError (jinja_error.h) for an unclosed tag or comment, a bad character or string, or a raw block.
std::vector<Token> lex(const std::string& source);

}  // namespace hone::jinja
