// Safe evaluation of small arithmetic expressions over integers with + - * / and parentheses, exactly (rationals).
// Used to compute synthetic arithmetic answers and to check countdown answers written by a model: a recursive-descent
// parser with a length and depth limit, no allocation proportional to anything but the input, never throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reward/rational.h"

namespace hone::reward {

struct ExpressionValue {
  bool ok = false;
  Rational value;
  std::vector<int64_t> numbers;  // the integer literals in the order written
  std::string error;             // why !ok: syntax, division by zero, overflow, too long
};

// Grammar: expr := term (('+'|'-') term)* ; term := factor (('*'|'/') factor)* ; factor := integer | '(' expr ')'.
// Spaces are allowed between tokens; integers have at most 18 digits; no unary minus.
ExpressionValue evaluate_expression(const std::string& text, size_t max_length = 512);

}  // namespace hone::reward
