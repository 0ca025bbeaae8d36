// Exact rationals on 128-bit integers with checked arithmetic: synthetic task answers, the countdown expression
// check and fraction comparison in the math answer checker. An operation that would overflow reports failure
// instead of wrapping, so callers treat it as "not comparable" rather than computing a wrong value.
#pragma once

#include <cstdint>
#include <string>

namespace hone::reward {

using i128 = __int128;

struct Rational {
  i128 num = 0;
  i128 den = 1;  // always > 0, gcd(num, den) == 1

  static Rational of(int64_t v) { return {v, 1}; }
  bool is_integer() const { return den == 1; }
  bool operator==(const Rational& o) const { return num == o.num && den == o.den; }
  long double approx() const { return static_cast<long double>(num) / static_cast<long double>(den); }
};

// Each returns false (leaving out unspecified) on overflow or division by zero.
bool make_rational(i128 num, i128 den, Rational& out);
bool add(const Rational& a, const Rational& b, Rational& out);
bool sub(const Rational& a, const Rational& b, Rational& out);
bool mul(const Rational& a, const Rational& b, Rational& out);
bool div(const Rational& a, const Rational& b, Rational& out);

std::string to_string(i128 v);
// "7", "-7/2"
std::string to_string(const Rational& r);
// Parses an optionally signed decimal integer of at most 38 digits; false otherwise.
bool parse_i128(const std::string& s, i128& out);

}  // namespace hone::reward
