// Exact evaluation of + - * / expressions (see expression_eval.h).
#include "reward/expression_eval.h"

namespace hone::reward {

namespace {

constexpr int kMaxDepth = 64;

struct Parser {
  const std::string& s;
  size_t i = 0;
  ExpressionValue& out;

  void skip() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  }
  bool fail(const std::string& why) {
    if (out.error.empty()) out.error = why;
    return false;
  }
  bool factor(Rational& v, int depth) {
    if (depth > kMaxDepth) return fail("nested too deeply");
    skip();
    if (i >= s.size()) return fail("expression ends early");
    if (s[i] == '(') {
      ++i;
      if (!expr(v, depth + 1)) return false;
      skip();
      if (i >= s.size() || s[i] != ')') return fail("missing ')'");
      ++i;
      return true;
    }
    if (s[i] < '0' || s[i] > '9') return fail(std::string("unexpected character '") + s[i] + "'");
    int64_t n = 0;
    int digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (++digits > 18) return fail("number too long");
      n = n * 10 + (s[i++] - '0');
    }
    out.numbers.push_back(n);
    v = Rational::of(n);
    return true;
  }
  bool term(Rational& v, int depth) {
    if (!factor(v, depth)) return false;
    while (true) {
      skip();
      if (i >= s.size() || (s[i] != '*' && s[i] != '/')) return true;
      char op = s[i++];
      Rational r;
      if (!factor(r, depth)) return false;
      if (op == '/' && r.num == 0) return fail("division by zero");
      if (!(op == '*' ? mul(v, r, v) : div(v, r, v))) return fail("overflow");
    }
  }
  bool expr(Rational& v, int depth) {
    if (!term(v, depth)) return false;
    while (true) {
      skip();
      if (i >= s.size() || (s[i] != '+' && s[i] != '-')) return true;
      char op = s[i++];
      Rational r;
      if (!term(r, depth)) return false;
      if (!(op == '+' ? add(v, r, v) : sub(v, r, v))) return fail("overflow");
    }
  }
};

}  // namespace

ExpressionValue evaluate_expression(const std::string& text, size_t max_length) {
  ExpressionValue out;
  if (text.size() > max_length) {
    out.error = "expression too long";
    return out;
  }
  Parser p{text, 0, out};
  Rational v;
  if (!p.expr(v, 0)) return out;
  p.skip();
  if (p.i != text.size()) {
    p.fail(std::string("unexpected character '") + text[p.i] + "'");
    return out;
  }
  out.ok = true;
  out.value = v;
  return out;
}

}  // namespace hone::reward
