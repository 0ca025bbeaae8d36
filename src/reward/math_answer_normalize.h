// Normalizing a math answer to a canonical string and, when it is a number, an exact value.
// See doc/data-and-rewards.md for every rule with examples: "$1{,}234.50$" -> 1234.5, "\dfrac{1}{2}" -> 1/2,
// "x = 5" -> 5, "30^\circ" -> 30, "50\%" -> 50 (percent noted), "5 \text{ cm}" -> 5, "1.5 \times 10^{3}" -> 1500.
#pragma once

#include <cstdint>
#include <string>

#include "reward/rational.h"

namespace hone::reward {

// An exactly written number: (-1)^negative * digits * 10^exponent, digits without leading or trailing zeros
// ("" for zero, which is never negative). Two decimals are equal exactly when their fields are.
struct Decimal {
  bool negative = false;
  std::string digits;
  int64_t exponent = 0;
  bool operator==(const Decimal& o) const {
    return negative == o.negative && digits == o.digits && exponent == o.exponent;
  }
};

struct MathNumber {
  bool is_decimal = false;      // written as a decimal (integer, 1.5, 1.5e3); `decimal` holds it exactly
  Decimal decimal;
  bool has_rational = false;    // the exact value fits a 128-bit rational
  Rational rational;
  long double approx = 0;       // the value, for relative tolerance (may be inf for huge exponents)
  bool integer_literal = false; // written as a whole number without a decimal point ("42", "-7", "1,000")
  bool real = false;            // written with fraction digits or in scientific notation ("0.5", "1e-3")
  bool percent = false;         // a percent sign was removed
};

struct NormalizedAnswer {
  std::string text;   // canonical string form (no spaces, \dfrac -> \frac, wrappers removed)
  bool is_number = false;
  MathNumber number;
};

NormalizedAnswer normalize_answer(const std::string& raw);

// Parses a canonical (space-free) string as a number: decimals, scientific notation ("1.5e3",
// "1.5\times10^{3}"), fractions ("\frac{a}{b}", "a/b" with decimal a and b, signs). False when it is not one.
bool parse_math_number(const std::string& s, MathNumber& out);

}  // namespace hone::reward
