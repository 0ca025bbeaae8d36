// Math answer normalization and number parsing (see math_answer_normalize.h). Each rewrite is one linear pass over
// the string, so adversarial answers (megabytes, thousands of commands) cost linear time.
#include "reward/math_answer_normalize.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <vector>

namespace hone::reward {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with_at(const std::string& s, size_t i, const char* p) { return s.compare(i, std::strlen(p), p) == 0; }

// Replaces every occurrence of `from`; a `from` that is a LaTeX command (\name) matches only when the next
// character is not a letter (\left must not eat \leftarrow).
std::string replace_all(const std::string& s, const char* from, const char* to) {
  const size_t n = std::strlen(from);
  const bool command = n > 1 && from[0] == '\\' && is_alpha(from[n - 1]);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, n, from) == 0 && !(command && i + n < s.size() && is_alpha(s[i + n]))) {
      out += to;
      i += n;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Removes the commands `names` around their braced argument: "\text{ cm}" -> " cm " (with pad " "). Nested and
// unbalanced braces are handled by a stack of which '{' opened an unwrapped argument.
std::string unwrap_commands(const std::string& s, std::initializer_list<const char*> names, const char* pad) {
  std::string out;
  out.reserve(s.size());
  std::vector<bool> unwrap;  // per open brace: true when its '}' is to be dropped
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '\\') {
      bool done = false;
      for (const char* name : names) {
        size_t n = std::strlen(name);
        if (!starts_with_at(s, i, name)) continue;
        size_t k = i + n;
        if (k < s.size() && is_alpha(s[k])) continue;
        while (k < s.size() && s[k] == ' ') ++k;
        if (k < s.size() && s[k] == '{') {
          unwrap.push_back(true);
          out += pad;
          i = k + 1;
          done = true;
          break;
        }
      }
      if (done) continue;
      // Keep an escaped brace as text.
      if (i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}')) {
        out += s[i];
        out += s[i + 1];
        i += 2;
        continue;
      }
    }
    if (s[i] == '{') unwrap.push_back(false);
    if (s[i] == '}' && !unwrap.empty()) {
      bool drop = unwrap.back();
      unwrap.pop_back();
      if (drop) {
        out += pad;
        ++i;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

std::string remove_spaces(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s)
    if (!is_space(c)) out += c;
  return out;
}

// "\frac12" -> "\frac{1}{2}", "\sqrt2" -> "\sqrt{2}": the shorthand takes single characters as arguments.
std::string brace_shorthand(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    int args = 0;
    size_t n = 0;
    if (starts_with_at(s, i, "\\frac") && !(i + 5 < s.size() && is_alpha(s[i + 5]))) args = 2, n = 5;
    if (starts_with_at(s, i, "\\sqrt") && !(i + 5 < s.size() && is_alpha(s[i + 5]))) args = 1, n = 5;
    if (args == 0) {
      out += s[i++];
      continue;
    }
    out.append(s, i, n);
    i += n;
    for (int a = 0; a < args && i < s.size(); ++a) {
      if (s[i] == '{' || s[i] == '[' || s[i] == '\\') break;  // already braced (or an optional/command argument)
      out += '{';
      out += s[i++];
      out += '}';
    }
  }
  return out;
}

// A one-word left side of "x = 5": x, y_1, a_{n}, \theta.
bool is_variable(const std::string& v) {
  if (v.empty() || v.size() > 12) return false;
  if (!is_alpha(v[0]) && v[0] != '\\') return false;
  for (char c : v)
    if (!is_alpha(c) && !is_digit(c) && c != '_' && c != '{' && c != '}' && c != '\\') return false;
  return true;
}

// Drops trailing unit words after a number: "5 cm" -> "5", "12 square feet" -> "12"; keeps "5 x", "2 and 3".
std::string strip_units(const std::string& s) {
  size_t j = 0;
  bool digit = false;
  while (j < s.size() && (is_digit(s[j]) || s[j] == '.' || s[j] == ',' || s[j] == '-' || s[j] == '+' || s[j] == ' ')) {
    digit = digit || is_digit(s[j]);
    ++j;
  }
  if (!digit || j == 0 || j >= s.size() || s[j - 1] != ' ' || !is_alpha(s[j])) return s;
  size_t w = j;
  while (w < s.size() && is_alpha(s[w])) ++w;
  const std::string word = s.substr(j, w - j);
  if (word.size() < 2 || word == "pi" || word == "and" || word == "or" || word == "to") return s;
  for (size_t k = j; k < s.size(); ++k) {
    char c = s[k];
    if (!is_alpha(c) && !is_digit(c) && c != ' ' && c != '^' && c != '/' && c != '.' && c != '{' && c != '}')
      return s;
  }
  return trim(s.substr(0, j));
}

bool strip_suffix(std::string& s, const char* suffix) {
  size_t n = std::strlen(suffix);
  if (s.size() < n || s.compare(s.size() - n, n, suffix) != 0) return false;
  s.erase(s.size() - n);
  return true;
}

// "1,234,567.5" -> "1234567.5" when the commas group digits by three; anything else is left alone ("1,2").
std::string drop_thousands_commas(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t lead = 0;
  while (i + lead < s.size() && is_digit(s[i + lead])) ++lead;
  if (lead < 1 || lead > 3 || i + lead >= s.size() || s[i + lead] != ',') return s;
  size_t k = i + lead;
  while (k < s.size() && s[k] == ',') {
    for (size_t d = 1; d <= 3; ++d)
      if (k + d >= s.size() || !is_digit(s[k + d])) return s;
    k += 4;
  }
  if (k < s.size() && s[k] != '.') return s;
  if (k < s.size()) {
    for (size_t d = k + 1; d < s.size(); ++d)
      if (!is_digit(s[d])) return s;
  }
  std::string out;
  for (char c : s)
    if (c != ',') out += c;
  return out;
}

// [+-]? (digits [. digits?] | . digits) ([eE][+-]?digits)? -> exact decimal.
bool parse_decimal(const std::string& s, MathNumber& out) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  std::string whole, frac;
  while (i < s.size() && is_digit(s[i])) whole += s[i++];
  bool point = i < s.size() && s[i] == '.';
  if (point) {
    ++i;
    while (i < s.size() && is_digit(s[i])) frac += s[i++];
  }
  if (whole.empty() && frac.empty()) return false;
  int64_t exp = 0;
  bool sci = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
    size_t start = i;
    while (i < s.size() && is_digit(s[i])) {
      exp = exp * 10 + (s[i++] - '0');
      if (i - start > 9) return false;
    }
    if (i == start) return false;
    if (eneg) exp = -exp;
    sci = true;
  }
  if (i != s.size()) return false;
  std::string digits = whole + frac;
  int64_t e = exp - static_cast<int64_t>(frac.size());
  size_t lead = 0;
  while (lead < digits.size() && digits[lead] == '0') ++lead;
  digits.erase(0, lead);
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++e;
  }
  MathNumber m;
  m.is_decimal = true;
  m.decimal.negative = neg && !digits.empty();
  m.decimal.digits = digits;
  m.decimal.exponent = digits.empty() ? 0 : e;
  m.integer_literal = !point && !sci;
  m.real = (point && !frac.empty()) || sci;
  const Decimal& d = m.decimal;
  const int64_t nd = static_cast<int64_t>(d.digits.size());
  if (nd == 0) {
    m.has_rational = true;
    m.rational = Rational{};
  } else if (nd <= 36 && d.exponent >= -36 && nd + d.exponent <= 36) {
    i128 v;
    parse_i128(d.digits, v);
    i128 scale = 1;
    for (int64_t k = 0; k < (d.exponent < 0 ? -d.exponent : d.exponent); ++k) scale *= 10;
    if (d.exponent >= 0)
      m.has_rational = make_rational((d.negative ? -v : v) * scale, 1, m.rational);
    else
      m.has_rational = make_rational(d.negative ? -v : v, scale, m.rational);
  }
  std::string approx = (d.negative ? "-" : "") + (nd ? d.digits : std::string("0")) + "e" + std::to_string(d.exponent);
  m.approx = std::strtold(approx.c_str(), nullptr);
  out = m;
  return true;
}

// Divides two parsed numbers into a fraction.
bool make_fraction(const MathNumber& a, const MathNumber& b, MathNumber& out) {
  if (b.approx == 0 && (!b.has_rational || b.rational.num == 0)) return false;
  MathNumber m;
  m.real = a.real || b.real;
  m.has_rational = a.has_rational && b.has_rational && div(a.rational, b.rational, m.rational);
  m.approx = a.approx / b.approx;
  if (m.has_rational && m.rational.is_integer() && !m.real) {
    // 4/2 is the integer 2: keep it exact as a decimal too so it compares with huge integers.
    m.is_decimal = parse_decimal(to_string(m.rational.num), m) && true;
    m.integer_literal = false;
    m.real = false;
  }
  out = m;
  return true;
}

}  // namespace

bool parse_math_number(const std::string& s, MathNumber& out) {
  if (s.empty() || s.size() > 400) return false;
  if (parse_decimal(s, out)) return true;
  if (s.rfind("10^", 0) == 0) return parse_math_number("1\\times" + s, out);  // 10^{3}
  // Sign in front of a fraction: -\frac{1}{2}.
  size_t i = 0;
  bool neg = false;
  if (s[0] == '-' || s[0] == '+') {
    neg = s[0] == '-';
    i = 1;
  }
  if (starts_with_at(s, i, "\\frac{")) {
    size_t a0 = i + 6, a1 = s.find('}', a0);
    if (a1 == std::string::npos || a1 + 1 >= s.size() || s[a1 + 1] != '{' || s.back() != '}') return false;
    size_t b0 = a1 + 2, b1 = s.size() - 1;
    MathNumber a, b;
    if (!parse_decimal(s.substr(a0, a1 - a0), a) || !parse_decimal(s.substr(b0, b1 - b0), b)) return false;
    if (!make_fraction(a, b, out)) return false;
  } else {
    size_t slash = s.find('/', i);
    size_t times = std::string::npos, tlen = 0;
    for (const char* t : {"\\times10^", "\\cdot10^", "*10^", "x10^"}) {
      size_t at = s.find(t);
      if (at != std::string::npos) times = at, tlen = std::strlen(t);
    }
    if (slash != std::string::npos && slash > i && s.find('/', slash + 1) == std::string::npos) {
      MathNumber a, b;
      if (!parse_decimal(s.substr(i, slash - i), a) || !parse_decimal(s.substr(slash + 1), b)) return false;
      if (!make_fraction(a, b, out)) return false;
    } else if (times != std::string::npos) {
      std::string exp = s.substr(times + tlen);
      if (exp.size() >= 2 && exp.front() == '{' && exp.back() == '}') exp = exp.substr(1, exp.size() - 2);
      std::string mant = s.substr(i, times - i);
      if (mant.find_first_of("eE") != std::string::npos || exp.empty()) return false;
      for (size_t k = 0; k < exp.size(); ++k)
        if (!is_digit(exp[k]) && !(k == 0 && (exp[k] == '-' || exp[k] == '+'))) return false;
      if (!parse_decimal(mant + "e" + exp, out)) return false;
    } else {
      return false;
    }
  }
  if (neg) {
    out.decimal.negative = out.is_decimal && !out.decimal.digits.empty() && !out.decimal.negative;
    out.rational.num = -out.rational.num;
    out.approx = -out.approx;
  }
  return true;
}

namespace {

// "12\mbox{ m}^2" -> "12": a text command after a number, optionally squared or cubed, is a unit.
std::string strip_text_unit(const std::string& s) {
  size_t p = std::string::npos;
  for (const char* cmd : {"\\text{", "\\text {", "\\mbox{", "\\mathrm{"}) {
    size_t at = s.rfind(cmd);
    if (at != std::string::npos && (p == std::string::npos || at > p)) p = at;
  }
  if (p == std::string::npos || p == 0) return s;
  size_t open = s.find('{', p);
  int depth = 0;
  size_t close = std::string::npos;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) {
      close = i;
      break;
    }
  }
  if (close == std::string::npos) return s;
  std::string tail = trim(s.substr(close + 1));
  if (!(tail.empty() || (tail[0] == '^' && tail.size() <= 4))) return s;
  std::string head = trim(s.substr(0, p));
  bool digit = false;
  for (char c : head) digit = digit || is_digit(c);
  if (!digit || !(is_digit(head.back()) || head.back() == '}')) return s;
  return head;
}

// "{{42}}" -> "42", but "{1}+{2}" stays: strips outer braces that match each other, in one pass.
std::string strip_outer_braces(const std::string& s) {
  if (s.size() < 2 || s.front() != '{' || s.back() != '}') return s;
  std::vector<size_t> match(s.size(), std::string::npos), stack;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') stack.push_back(i);
    if (s[i] == '}' && !stack.empty()) {
      match[stack.back()] = i;
      stack.pop_back();
    }
  }
  size_t l = 0, r = s.size() - 1;
  while (l < r && s[l] == '{' && match[l] == r) ++l, --r;
  return s.substr(l, r - l + 1);
}

}  // namespace

NormalizedAnswer normalize_answer(const std::string& raw) {
  std::string s = raw;
  s = unwrap_commands(s, {"\\boxed", "\\fbox"}, "");
  s = strip_text_unit(s);
  s = unwrap_commands(s, {"\\text", "\\textbf", "\\textit", "\\textrm", "\\texttt", "\\textnormal", "\\mathrm",
                          "\\mathbf", "\\mathit", "\\mbox", "\\hbox", "\\operatorname"},
                      " ");
  for (auto [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {"\\dfrac", "\\frac"}, {"\\tfrac", "\\frac"}, {"\\cfrac", "\\frac"}, {"\\left", ""}, {"\\right", ""},
           {"\\displaystyle", ""}, {"\\!", ""}, {"\\,", ""}, {"\\;", ""}, {"\\:", ""}, {"\\ ", " "}, {"~", " "},
           {"{,}", ""}, {"\\$", ""}, {"$", ""}, {"\\(", ""}, {"\\)", ""}, {"\\[", ""}, {"\\]", ""},
           {"^{\\circ}", ""}, {"^\\circ", ""}, {"\\circ", ""}, {"\xC2\xB0", ""}, {"\\degree", ""},
           {"\\%", "%"}, {"\\le", "\\leq"}, {"\\ge", "\\geq"}, {"\xE2\x88\x92", "-"} /* U+2212 minus */})
    s = replace_all(s, from, to);
  s = trim(s);
  NormalizedAnswer out;
  bool percent = false;
  // Trailing periods, and a percent sign or word, in any order: "50\%." "50 percent".
  for (bool changed = true; changed;) {
    changed = false;
    while (!s.empty() && (s.back() == '.' || is_space(s.back()))) s.pop_back(), changed = true;
    if (strip_suffix(s, "%") || strip_suffix(s, "percent")) percent = changed = true;
  }
  // "x = 5" -> "5" (a single '=' with a variable on the left; not <=, >=, ==).
  size_t eq = s.find('=');
  if (eq != std::string::npos && s.find('=', eq + 1) == std::string::npos && eq > 0 && s[eq - 1] != '<' &&
      s[eq - 1] != '>' && s[eq - 1] != '!') {
    std::string left = trim(s.substr(0, eq)), right = trim(s.substr(eq + 1));
    if (is_variable(left) && !right.empty()) s = right;
  }
  // "x \in [2, 5]" -> "[2, 5]".
  size_t in = s.find("\\in");
  if (in != std::string::npos && is_variable(trim(s.substr(0, in))) && in + 3 < s.size() && !is_alpha(s[in + 3]))
    s = trim(s.substr(in + 3));
  s = trim(strip_units(s));
  s = remove_spaces(s);
  s = brace_shorthand(s);
  s = strip_outer_braces(s);
  // Multiple choice "(B)" -> "B"; word answers compare case-insensitively.
  if (s.size() == 3 && s[0] == '(' && s[2] == ')' && is_alpha(s[1])) s = s.substr(1, 1);
  bool word = s.size() >= 2;
  for (char c : s) word = word && is_alpha(c);
  if (word)
    for (char& c : s) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  s = drop_thousands_commas(s);
  out.text = s;
  out.is_number = parse_math_number(s, out.number);
  if (out.is_number) out.number.percent = percent;
  else if (percent) out.text += "%";
  return out;
}

}  // namespace hone::reward
