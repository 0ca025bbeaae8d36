// Python semantics of chat template values: str(), repr(), bool(), ==, ordering and json.dumps.
#include "tokenizer/jinja_value.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "runtime/error.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_limits.h"
#include "tokenizer/utf8.h"

namespace hone::jinja {

namespace {

// A container's depth and whether it holds a namespace, from its items; the nesting limit checked.
template <class Items, class Get>
void take_shape(const Items& items, Get get, uint16_t& depth, bool& holds_namespace) {
  int d = 0;
  for (const auto& item : items) {
    const Value& x = get(item);
    d = std::max(d, x.depth());
    holds_namespace = holds_namespace || x.holds_namespace();
  }
  if (d + 1 > kMaxNesting) throw TemplateError(0, nesting_limit_message());
  depth = uint16_t(d + 1);
}

// A walk through a value (str(), json.dumps, ==, <): charged to the rendering's work, bounded in depth. Built
// values nest at most kMaxNesting levels; a namespace's items may add as many again.
void visit(int level) {
  if (level > 2 * kMaxNesting + 2) throw TemplateError(0, nesting_limit_message());
  RenderBudget::charge(1);
}

}  // namespace

Value Value::list(List items, bool tuple) {
  if (items.size() > kMaxListItems)
    throw TemplateError(0, "the template builds a list of more than " + std::to_string(kMaxListItems) +
                               " items (hone's limit)");
  Value v = of(Kind::List);
  v.tuple_ = tuple;
  take_shape(items, [](const Value& x) -> const Value& { return x; }, v.depth_, v.holds_namespace_);
  v.list_ = std::make_shared<const List>(std::move(items));
  return v;
}

Value Value::dict(Dict items) {
  Value v = of(Kind::Dict);
  take_shape(items, [](const auto& kv) -> const Value& { return kv.second; }, v.depth_, v.holds_namespace_);
  v.dict_ = std::make_shared<Dict>(std::move(items));
  return v;
}

Value Value::namespace_of(Dict items) {
  Value v = dict(std::move(items));
  if (v.holds_namespace_) throw TemplateError(0, "a namespace cannot hold another namespace (hone's limit)");
  v.kind_ = Kind::Namespace;
  v.holds_namespace_ = true;
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (!is_mapping()) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0;
    case Kind::String: return !str_.empty();
    case Kind::List: return !list_->empty();
    case Kind::Dict: return !dict_->empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

std::string python_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);  // shortest round trip
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp10 < -4 || exp10 >= 16) {  // Python's repr switches to exponent notation here
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    return out + eb;
  }
  std::string out;
  if (exp10 < 0) {
    out = "0." + std::string(size_t(-exp10 - 1), '0') + digits;
  } else if (size_t(exp10) + 1 >= digits.size()) {
    out = digits + std::string(size_t(exp10) + 1 - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, size_t(exp10) + 1) + "." + digits.substr(size_t(exp10) + 1);
  }
  return sign + out;
}

namespace {

// Python's str.isprintable() for one code point: not a control, format, surrogate, private-use, unassigned or
// separator character (the ASCII space excepted).
bool py_printable(uint32_t cp) {
  if (cp == ' ') return true;
  switch (utf8proc_category(utf8proc_int32_t(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = tok::utf8_next(s, i);
    char buf[16];
    if (cp == uint32_t(quote) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!py_printable(cp)) {
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += buf;
    } else {
      tok::utf8_append(out, cp);
    }
  }
  return out + quote;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, int indent, bool sort_keys, int level) {
  using K = Value::Kind;
  visit(level);
  check_string_size(out.size());
  const auto newline = [&](int lvl) {
    if (indent < 0) return;
    check_string_size(out.size() + size_t(indent) * size_t(lvl));
    out += "\n" + std::string(size_t(indent) * size_t(lvl), ' ');
  };
  const char* item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case K::None: out += "null"; return;
    case K::Bool: out += v.as_bool() ? "true" : "false"; return;
    case K::Int: out += std::to_string(v.as_int()); return;
    case K::Float: {
      const double f = v.as_double();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity") : python_float(f);
      return;
    }
    case K::String: json_string(out, v.as_string()); return;
    case K::List: {
      if (v.as_list().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.as_list().size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_value(out, v.as_list()[i], indent, sort_keys, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case K::Dict: {
      Dict items = v.as_dict();
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        newline(level + 1);
        json_string(out, items[i].first);
        out += ": ";
        json_value(out, items[i].second, indent, sort_keys, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    default: throw UserError(cat("Object of type ", v.type_name(), " is not JSON serializable"));
  }
}

}  // namespace

void Value::repr_into(std::string& out, int level) const {
  visit(level);
  check_string_size(out.size());
  switch (kind_) {
    case Kind::String: out += string_repr(str_); return;
    case Kind::List: {
      out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        (*list_)[i].repr_into(out, level + 1);
      }
      if (tuple_ && list_->size() == 1) out += ",";
      out += tuple_ ? ")" : "]";
      return;
    }
    case Kind::Dict: {
      out += "{";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i) out += ", ";
        out += string_repr((*dict_)[i].first) + ": ";
        (*dict_)[i].second.repr_into(out, level + 1);
      }
      out += "}";
      return;
    }
    case Kind::Namespace: {
      out += "<Namespace {";
      for (size_t i = 0; i < dict_->size(); ++i) {
        if (i) out += ", ";
        out += string_repr((*dict_)[i].first) + ": ";
        (*dict_)[i].second.repr_into(out, level + 1);
      }
      out += "}>";
      return;
    }
    default: out += str(); return;
  }
}

std::string Value::repr() const {
  std::string out;
  repr_into(out, 0);
  check_string_size(out.size());
  return out;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::Undefined: return "";
    case Kind::None: return "None";
    case Kind::Bool: return int_ ? "True" : "False";
    case Kind::Int: return std::to_string(int_);
    case Kind::Float: return python_float(float_);
    case Kind::String: return str_;
    case Kind::List:
    case Kind::Dict: return repr();
    case Kind::Namespace: return repr();
    case Kind::Function: return "<function " + str_ + ">";
  }
  return "";
}

namespace {

bool equal_at(const Value& a, const Value& b, int level) {
  using K = Value::Kind;
  visit(level);
  if (a.is_number() && b.is_number()) {
    if (a.is(K::Float) || b.is(K::Float)) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String:
    case K::Function: return a.as_string() == b.as_string();
    case K::List: {
      const List &x = a.as_list(), &y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal_at(x[i], y[i], level + 1)) return false;
      return true;
    }
    case K::Dict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* w = b.find(k);
        if (!w || !equal_at(v, *w, level + 1)) return false;
      }
      return true;
    }
    case K::Namespace: return &a.namespace_items() == &b.namespace_items();
    default: return false;
  }
}

int compare_at(const Value& a, const Value& b, int level) {
  using K = Value::Kind;
  visit(level);
  if (a.is_number() && b.is_number()) {
    if (a.is(K::Float) || b.is(K::Float)) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is(K::String) && b.is(K::String)) {
    const int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is(K::List) && b.is(K::List)) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal_at(x[i], y[i], level + 1)) return compare_at(x[i], y[i], level + 1);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw UserError(cat("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'"));
}

}  // namespace

bool equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }
int compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  json_value(out, v, indent, sort_keys, 0);
  check_string_size(out.size());
  return out;
}

std::vector<uint32_t> code_points(const std::string& s) {
  RenderBudget::charge(int64_t(s.size() / 256));
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) cps.push_back(tok::utf8_next(s, i));
  return cps;
}

std::string code_point_string(uint32_t cp) {
  std::string s;
  tok::utf8_append(s, cp);
  return s;
}

bool iterable_items(const Value& v, List& items) {
  switch (v.kind()) {
    case Value::Kind::Undefined: items.clear(); return true;
    case Value::Kind::List: items = v.as_list(); return true;
    case Value::Kind::Dict:
      items.clear();
      for (const auto& kv : v.as_dict()) items.push_back(Value::string(kv.first));
      return true;
    case Value::Kind::String: {
      items.clear();
      const std::vector<uint32_t> cps = code_points(v.as_string());
      if (cps.size() > kMaxListItems)
        throw TemplateError(0, "the template builds a list of more than " + std::to_string(kMaxListItems) +
                                   " items (hone's limit)");
      for (uint32_t cp : cps) items.push_back(Value::string(code_point_string(cp)));
      return true;
    }
    default: return false;
  }
}

}  // namespace hone::jinja
