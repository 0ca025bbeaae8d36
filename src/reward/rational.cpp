// Checked 128-bit rationals (see rational.h).
#include "reward/rational.h"

#include <algorithm>

namespace hone::reward {

namespace {

i128 gcd(i128 a, i128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

constexpr i128 kMax = static_cast<i128>((static_cast<unsigned __int128>(1) << 126) - 1);  // headroom for negation

bool checked_mul(i128 a, i128 b, i128& out) {
  if (__builtin_mul_overflow(a, b, &out)) return false;
  return out <= kMax && out >= -kMax;
}
bool checked_add(i128 a, i128 b, i128& out) {
  if (__builtin_add_overflow(a, b, &out)) return false;
  return out <= kMax && out >= -kMax;
}

}  // namespace

bool make_rational(i128 num, i128 den, Rational& out) {
  if (den == 0 || num > kMax || num < -kMax || den > kMax || den < -kMax) return false;
  if (den < 0) {
    num = -num;
    den = -den;
  }
  i128 g = gcd(num, den);
  if (g == 0) g = 1;
  out.num = num / g;
  out.den = den / g;
  return true;
}

bool add(const Rational& a, const Rational& b, Rational& out) {
  i128 g = gcd(a.den, b.den);
  i128 x, y, n, d;
  if (!checked_mul(a.num, b.den / g, x) || !checked_mul(b.num, a.den / g, y) || !checked_add(x, y, n) ||
      !checked_mul(a.den / g, b.den, d))
    return false;
  return make_rational(n, d, out);
}

bool sub(const Rational& a, const Rational& b, Rational& out) { return add(a, Rational{-b.num, b.den}, out); }

bool mul(const Rational& a, const Rational& b, Rational& out) {
  i128 g1 = gcd(a.num, b.den), g2 = gcd(b.num, a.den);
  if (g1 == 0) g1 = 1;
  if (g2 == 0) g2 = 1;
  i128 n, d;
  if (!checked_mul(a.num / g1, b.num / g2, n) || !checked_mul(a.den / g2, b.den / g1, d)) return false;
  return make_rational(n, d, out);
}

bool div(const Rational& a, const Rational& b, Rational& out) {
  if (b.num == 0) return false;
  return mul(a, Rational{b.den, b.num}, out) ? make_rational(out.num, out.den, out) : false;
}

std::string to_string(i128 v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  unsigned __int128 u = neg ? static_cast<unsigned __int128>(-(v + 1)) + 1 : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  std::reverse(s.begin(), s.end());
  return s;
}

std::string to_string(const Rational& r) {
  return r.den == 1 ? to_string(r.num) : to_string(r.num) + "/" + to_string(r.den);
}

bool parse_i128(const std::string& s, i128& out) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == s.size() || s.size() - i > 38) return false;
  i128 v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = neg ? -v : v;
  return true;
}

}  // namespace hone::reward
