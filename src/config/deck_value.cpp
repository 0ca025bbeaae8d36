// Deck values as text (TOML and messages), type names, and the per-value checks (range, allowed values).
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "config/schema.h"
#include "runtime/error.h"

namespace hone {

std::string key_type_article_name(KeyType t) {
  switch (t) {
    case KeyType::boolean: return "a boolean (true or false)";
    case KeyType::integer: return "an integer";
    case KeyType::floating: return "a number";
    case KeyType::string: return "a string";
    case KeyType::enumeration: return "a string";
    case KeyType::string_list: return "an array of strings";
    case KeyType::int_list: return "an array of integers";
  }
  return "?";
}

std::string key_type_short_name(KeyType t) {
  switch (t) {
    case KeyType::boolean: return "bool";
    case KeyType::integer: return "int";
    case KeyType::floating: return "float";
    case KeyType::string: return "string";
    case KeyType::enumeration: return "enum";
    case KeyType::string_list: return "array of strings";
    case KeyType::int_list: return "array of ints";
  }
  return "?";
}

namespace {

// The shortest decimal text that reads back as exactly this double, always with a '.' or an exponent
// so that TOML reads it as a float.
std::string float_text(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string t = buf;
  // %g writes 600 as "6e+02": whole numbers below 1e16 read better written out ("600.0").
  if (t.find('e') != std::string::npos && std::fabs(x) >= 1 && std::fabs(x) < 1e16 && x == std::floor(x)) {
    std::snprintf(buf, sizeof buf, "%.1f", x);
    t = buf;
  }
  if (t.find_first_of(".en") == std::string::npos) t += ".0";
  // TOML wants a digit after the point and before an exponent: "1e-06" is fine, "1.e5" never comes from %g.
  return t;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

double as_number(const DeckValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::string number_text(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e15) return std::to_string(static_cast<int64_t>(x));
  return float_text(x);
}

bool in_range(const KeySpec& k, double x) {
  if (k.min && (k.min_open ? !(x > *k.min) : !(x >= *k.min))) return false;
  if (k.max && (k.max_open ? !(x < *k.max) : !(x <= *k.max))) return false;
  return true;
}

}  // namespace

std::string deck_value_to_toml(const DeckValue& v) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return float_text(d); }
    std::string operator()(const std::string& s) const { return quoted(s); }
    std::string operator()(const std::vector<std::string>& l) const {
      std::string out = "[";
      for (size_t a = 0; a < l.size(); ++a) out += (a ? ", " : "") + quoted(l[a]);
      return out + "]";
    }
    std::string operator()(const std::vector<int64_t>& l) const {
      std::string out = "[";
      for (size_t a = 0; a < l.size(); ++a) out += (a ? ", " : "") + std::to_string(l[a]);
      return out + "]";
    }
  };
  return std::visit(Visitor{}, v);
}

std::string deck_value_for_message(const DeckValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) {
    std::string q = quoted(*s);  // escapes keep the message on one line
    return "'" + q.substr(1, q.size() - 2) + "'";
  }
  return deck_value_to_toml(v);
}

std::string key_range_text(const KeySpec& k) {
  if (k.min && k.max) {
    if (!k.min_open && !k.max_open) return cat("in [", number_text(*k.min), ", ", number_text(*k.max), "]");
    return cat("in ", k.min_open ? "(" : "[", number_text(*k.min), ", ", number_text(*k.max), k.max_open ? ")" : "]");
  }
  if (k.min) return cat(k.min_open ? "> " : ">= ", number_text(*k.min));
  if (k.max) return cat(k.max_open ? "< " : "<= ", number_text(*k.max));
  return "";
}

std::string check_deck_value(const KeySpec& k, const DeckValue& v) {
  const std::string lhs = cat("'", k.path, "' = ", deck_value_for_message(v), " is ");
  // A path, a command, a stop string: the operating system and C strings end at a NUL byte, so a string with one
  // would be cut short where it is used, silently.
  const char* const nul = "a string with a NUL byte (\\u0000), which no path, command or text of hone can carry";
  if (const auto* s = std::get_if<std::string>(&v); s && s->find('\0') != std::string::npos) return lhs + nul;
  if (const auto* l = std::get_if<std::vector<std::string>>(&v))
    for (size_t a = 0; a < l->size(); ++a)
      if ((*l)[a].find('\0') != std::string::npos)
        return cat("'", k.path, "[", a, "]' = ", deck_value_for_message(DeckValue((*l)[a])), " is ", nul);
  switch (k.type) {
    case KeyType::integer:
    case KeyType::floating: {
      if (k.type == KeyType::integer && std::get<int64_t>(v) > k.int_limit)
        return cat(lhs, "out of range: must be at most ", k.int_limit);
      const double x = as_number(v);
      if (!std::isfinite(x)) return lhs + "not a finite number";
      if (!in_range(k, x)) return cat(lhs, "out of range: must be ", key_range_text(k));
      break;
    }
    case KeyType::int_list: {
      const auto& l = std::get<std::vector<int64_t>>(v);
      for (size_t a = 0; a < l.size(); ++a) {
        if (l[a] > k.int_limit)
          return cat("'", k.path, "[", a, "]' = ", l[a], " is out of range: must be at most ", k.int_limit);
        if (!in_range(k, static_cast<double>(l[a])))
          return cat("'", k.path, "[", a, "]' = ", l[a], " is out of range: must be ", key_range_text(k));
      }
      break;
    }
    case KeyType::enumeration: {
      const auto& s = std::get<std::string>(v);
      bool ok = false;
      for (const auto& a : k.allowed) ok = ok || a == s;
      if (!ok) {
        std::string list;
        for (size_t a = 0; a < k.allowed.size(); ++a) list += (a ? ", " : "") + k.allowed[a];
        return cat(lhs, "not one of the allowed values: ", list);
      }
      break;
    }
    default: break;
  }
  if (k.check) {
    const std::string why = k.check(v);
    if (!why.empty()) return lhs + why;
  }
  return "";
}

}  // namespace hone
