// Filters, tests, globals and methods of chat templates. Each follows jinja2's (or Python's) definition for the
// arguments chat templates pass; an argument form hone does not follow is an error, never a silent difference.
#include "tokenizer/jinja_builtins.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <set>

#include "runtime/error.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_limits.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/utf8.h"

namespace hone::jinja {

namespace {

using VK = Value::Kind;

const std::set<std::string> kFilters = {
    "trim", "length", "count", "tojson", "string", "lower", "upper", "capitalize", "title", "join", "items", "list",
    "first", "last", "default", "d", "replace", "reject", "select", "rejectattr", "selectattr", "map", "reverse",
    "int", "float", "abs", "safe", "unique", "sort"};
const std::set<std::string> kTests = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "boolean", "true", "false", "mapping",
    "iterable", "sequence", "callable", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge",
    ">=", "in", "odd", "even", "divisibleby", "sameas", "lower", "upper"};
const std::set<std::string> kGlobals = {"raise_exception", "namespace", "dict", "range", "strftime_now"};

[[noreturn]] void fail(const CallArgs& a, const std::string& message) { throw TemplateError(a.line, message); }

const std::string& need_string(const Value& v, const CallArgs& a, const char* what) {
  if (!v.is(VK::String)) fail(a, std::string(what) + " needs a string, got " + v.type_name());
  return v.as_string();
}

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto cp = utf8proc_int32_t(tok::utf8_next(s, i));
    tok::utf8_append(out, uint32_t(upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
  }
  return out;
}

// Python's str.strip(chars) family; chars == nullptr strips whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  if (!chars) {
    std::string_view v = s;
    if (left) v = tok::py_lstrip(v);
    if (right) v = tok::py_rstrip(v);
    return std::string(v);
  }
  const auto set = code_points(*chars);
  auto cps = code_points(s);
  size_t b = 0, e = cps.size();
  auto in_set = [&](uint32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); };
  if (left)
    while (b < e && in_set(cps[b])) ++b;
  if (right)
    while (e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) tok::utf8_append(out, cps[i]);
  return out;
}

[[noreturn]] void list_limit() {
  throw TemplateError(0, "the template builds a list of more than " + std::to_string(kMaxListItems) + " items (hone's limit)");
}

void add_part(std::vector<std::string>& parts, std::string part) {
  if (parts.size() >= kMaxListItems) list_limit();
  parts.push_back(std::move(part));
}

// Python's str.split(sep, maxsplit) and rsplit.
List split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right, const CallArgs& a) {
  std::vector<std::string> parts;
  if (!sep || sep->is(VK::None)) {
    // Runs of whitespace separate; leading and trailing whitespace gives no empty parts.
    std::vector<std::pair<size_t, size_t>> words;  // byte ranges
    size_t i = 0;
    while (i < s.size()) {
      size_t j = i;
      const uint32_t cp = tok::utf8_next(s, j);
      if (tok::py_isspace(cp)) {
        i = j;
        continue;
      }
      size_t start = i;
      while (i < s.size()) {
        size_t k = i;
        if (tok::py_isspace(tok::utf8_next(s, k))) break;
        i = k;
      }
      if (words.size() >= kMaxListItems) list_limit();
      words.emplace_back(start, i);
    }
    if (maxsplit < 0 || int64_t(words.size()) <= maxsplit + 1) {
      for (auto [b, e] : words) add_part(parts, s.substr(b, e - b));
    } else if (!from_right) {
      for (int64_t k = 0; k < maxsplit; ++k) add_part(parts, s.substr(words[size_t(k)].first, words[size_t(k)].second - words[size_t(k)].first));
      add_part(parts, std::string(tok::py_rstrip(std::string_view(s).substr(words[size_t(maxsplit)].first))));
    } else {
      const size_t first = words.size() - size_t(maxsplit);
      add_part(parts, std::string(tok::py_lstrip(std::string_view(s).substr(0, words[first - 1].second))));
      for (size_t k = first; k < words.size(); ++k) add_part(parts, s.substr(words[k].first, words[k].second - words[k].first));
    }
  } else {
    const std::string& d = need_string(*sep, a, "split");
    if (d.empty()) fail(a, "split: empty separator");
    if (!from_right) {
      size_t start = 0;
      int64_t n = 0;
      for (size_t p; (maxsplit < 0 || n < maxsplit) && (p = s.find(d, start)) != std::string::npos; ++n) {
        add_part(parts, s.substr(start, p - start));
        start = p + d.size();
      }
      add_part(parts, s.substr(start));
    } else {
      size_t end = s.size();
      int64_t n = 0;
      std::vector<std::string> rev;
      while ((maxsplit < 0 || n < maxsplit) && end >= d.size()) {
        const size_t p = s.rfind(d, end - d.size());
        if (p == std::string::npos) break;
        add_part(rev, s.substr(p + d.size(), end - p - d.size()));
        end = p;
        ++n;
      }
      add_part(rev, s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  }
  List out;
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  RenderBudget::charge(int64_t(s.size() / 256));
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const auto cps = code_points(s);
    const size_t inserts = count < 0 ? cps.size() + 1 : std::min(cps.size() + 1, size_t(count));
    if (!to.empty() && inserts > kMaxStringBytes / to.size()) throw_string_limit();
    check_string_size(s.size() + inserts * to.size());
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) tok::utf8_append(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t p; (count < 0 || n < count) && (p = s.find(from, start)) != std::string::npos; ++n) {
    out.append(s, start, p - start);
    out += to;
    check_string_size(out.size());  // each round adds a bounded piece: checked before the next
    start = p + from.size();
  }
  out.append(s, start);
  check_string_size(out.size());
  return out;
}

List as_list(const Value& v, const CallArgs& a) {
  List items;
  if (!iterable_items(v, items)) fail(a, std::string("'") + v.type_name() + "' object is not iterable");
  return items;
}

int64_t length(const Value& v, const CallArgs& a) {
  switch (v.kind()) {
    case VK::Undefined: return 0;
    case VK::String: return int64_t(code_points(v.as_string()).size());
    case VK::List: return int64_t(v.as_list().size());
    case VK::Dict:
    case VK::Namespace: return int64_t(v.as_dict().size());
    default: fail(a, std::string("object of type '") + v.type_name() + "' has no len()");
  }
}

int64_t int_arg(const Value* v, int64_t dflt, const CallArgs& a, const char* what) {
  if (!v || v->is(VK::None)) return dflt;
  if (!v->is(VK::Int) && !v->is(VK::Bool)) fail(a, std::string(what) + " needs an integer");
  return v->as_int();
}

// The arguments after the first `skip` positional ones, as the arguments of a test (select, reject ...).
CallArgs rest(const CallArgs& a, size_t skip) {
  CallArgs r;
  r.line = a.line;
  for (size_t k = skip; k < a.positional.size(); ++k) r.positional.push_back(a.positional[k]);
  return r;
}

Value attr_of(const Value& v, const std::string& name) {
  const Value* x = v.find(name);
  return x ? *x : Value::undefined("'" + name + "'");
}

}  // namespace

bool known_filter(const std::string& name) { return kFilters.count(name) > 0; }
bool known_test(const std::string& name) { return kTests.count(name) > 0; }
bool is_global_function(const std::string& name) { return kGlobals.count(name) > 0; }

const Value* CallArgs::get(size_t i, const char* name) const {
  if (i < positional.size()) return &positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    const std::string* set = chars && !chars->is(VK::None) ? &need_string(*chars, a, "trim") : nullptr;
    return Value::string(strip(v.str(), set, true, true));
  }
  if (name == "length" || name == "count") return Value::integer(length(v, a));
  if (name == "tojson") {
    const Value* ascii = a.get(1, "ensure_ascii");
    if (ascii && ascii->truthy()) fail(a, "tojson: ensure_ascii=True is not supported");
    if (a.get(2, "separators") && !a.get(2, "separators")->is(VK::None)) fail(a, "tojson: separators are not supported");
    const Value* sort = a.get(3, "sort_keys");
    try {
      return Value::string(to_json(v, int(int_arg(a.get(0, "indent"), -1, a, "tojson indent")), sort && sort->truthy()));
    } catch (const UserError& e) {
      fail(a, e.what());
    }
  }
  if (name == "string") return Value::string(v.str());
  if (name == "lower" || name == "upper") return Value::string(map_case(v.str(), name == "upper"));
  if (name == "capitalize" || name == "title") {
    const auto cps = code_points(v.str());
    std::string out;
    bool start = true;
    for (uint32_t cp : cps) {
      const auto c = utf8proc_int32_t(cp);
      tok::utf8_append(out, uint32_t(start ? utf8proc_totitle(c) : utf8proc_tolower(c)));
      start = name == "title" && !(utf8proc_category(c) >= UTF8PROC_CATEGORY_LU && utf8proc_category(c) <= UTF8PROC_CATEGORY_LO);
    }
    return Value::string(std::move(out));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attr = a.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : as_list(v, a)) {
      if (!first) out += sep ? sep->str() : "";
      first = false;
      out += (attr ? attr_of(x, attr->str()) : x).str();
      check_string_size(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_mapping()) fail(a, std::string("items: expected a mapping, got ") + v.type_name());
    List out;
    for (const auto& [k, x] : v.as_dict()) out.push_back(Value::list({Value::string(k), x}, /*tuple=*/true));
    return Value::list(std::move(out));
  }
  if (name == "list") return Value::list(as_list(v, a));
  if (name == "first" || name == "last") {
    const List items = as_list(v, a);
    if (items.empty()) return Value::undefined("'" + name + "' of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    const Value* dflt = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    const bool use = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    return use ? (dflt ? *dflt : Value::string("")) : v;
  }
  if (name == "replace") {
    const Value *from = a.get(0, "old"), *to = a.get(1, "new");
    if (!from || !to) fail(a, "replace needs two arguments");
    return Value::string(replace(v.str(), from->str(), to->str(), int_arg(a.get(2, "count"), -1, a, "replace count")));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.size() > 6;
    const bool keep_if = name.rfind("select", 0) == 0;
    const size_t test_at = by_attr ? 1 : 0;
    if (by_attr && a.positional.empty()) fail(a, name + " needs an attribute name");
    List out;
    for (const Value& x : as_list(v, a)) {
      const Value subject = by_attr ? attr_of(x, a.positional[0].str()) : x;
      bool pass;
      if (a.positional.size() > test_at) {
        pass = apply_test(need_string(a.positional[test_at], a, name.c_str()), subject, rest(a, test_at + 1));
      } else {
        pass = subject.truthy();
      }
      if (pass == keep_if) out.push_back(x);
    }
    return Value::list(std::move(out));
  }
  if (name == "map") {
    List out;
    const Value* attr = a.get(99, "attribute");
    for (const Value& x : as_list(v, a)) {
      if (attr) {
        Value y = attr_of(x, attr->str());
        const Value* dflt = a.get(99, "default");
        out.push_back(y.is_undefined() && dflt ? *dflt : y);
      } else {
        if (a.positional.empty()) fail(a, "map needs a filter name or attribute=");
        const std::string& f = need_string(a.positional[0], a, "map");
        if (!known_filter(f)) fail(a, "unsupported filter '" + f + "'");
        out.push_back(apply_filter(f, x, rest(a, 1)));
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "reverse") {
    if (v.is(VK::String)) {
      auto cps = code_points(v.as_string());
      std::string out;
      for (size_t i = cps.size(); i-- > 0;) tok::utf8_append(out, cps[i]);
      return Value::string(std::move(out));
    }
    List items = as_list(v, a);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& x : as_list(v, a))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); })) out.push_back(x);
    return Value::list(std::move(out));
  }
  if (name == "sort") {
    List items = as_list(v, a);
    const Value* rev = a.get(0, "reverse");
    try {
      std::stable_sort(items.begin(), items.end(), [](const Value& x, const Value& y) { return compare(x, y) < 0; });
    } catch (const UserError& e) {
      fail(a, e.what());
    }
    if (rev && rev->truthy()) std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "int") {
    if (v.is(VK::Float)) return Value::integer(int64_t(v.as_double()));
    if (v.is_number()) return Value::integer(v.as_int());
    try {
      return Value::integer(std::stoll(std::string(tok::py_strip(v.str()))));
    } catch (const std::exception&) {
      return Value::integer(int_arg(a.get(0, "default"), 0, a, "int default"));
    }
  }
  if (name == "float") {
    if (v.is_number()) return Value::number(v.as_double());
    try {
      return Value::number(std::stod(std::string(tok::py_strip(v.str()))));
    } catch (const std::exception&) {
      const Value* d = a.get(0, "default");
      return Value::number(d ? d->as_double() : 0.0);
    }
  }
  if (name == "abs") {
    if (v.is(VK::Float)) return Value::number(std::abs(v.as_double()));
    if (v.is_number()) return Value::integer(std::abs(v.as_int()));
    fail(a, std::string("bad operand type for abs(): '") + v.type_name() + "'");
  }
  if (name == "safe") return v;
  fail(a, "unsupported filter '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  const Value* arg = a.get(0, "other");
  auto need_arg = [&]() -> const Value& {
    if (!arg) fail(a, "test '" + name + "' needs an argument");
    return *arg;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is(VK::None);
  if (name == "string") return v.is(VK::String);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(VK::Int);
  if (name == "float") return v.is(VK::Float);
  if (name == "boolean") return v.is(VK::Bool);
  if (name == "true") return v.is(VK::Bool) && v.as_bool();
  if (name == "false") return v.is(VK::Bool) && !v.as_bool();
  if (name == "mapping") return v.is(VK::Dict);
  if (name == "iterable") return v.is(VK::String) || v.is(VK::List) || v.is(VK::Dict) || v.is_undefined();
  if (name == "sequence") return v.is(VK::String) || v.is(VK::List) || v.is(VK::Dict);
  if (name == "callable") return v.is(VK::Function);
  if (name == "equalto" || name == "eq" || name == "==") return equal(v, need_arg());
  if (name == "ne" || name == "!=") return !equal(v, need_arg());
  if (name == "sameas") return equal(v, need_arg()) && v.kind() == need_arg().kind();
  if (name == "in") {
    const Value& c = need_arg();
    if (c.is(VK::String)) return v.is(VK::String) && c.as_string().find(v.as_string()) != std::string::npos;
    if (c.is_mapping()) return v.is(VK::String) && c.find(v.as_string());
    for (const Value& x : as_list(c, a))
      if (equal(x, v)) return true;
    return false;
  }
  if (name == "lt" || name == "<" || name == "le" || name == "<=" || name == "gt" || name == ">" || name == "ge" || name == ">=") {
    int c;
    try {
      c = compare(v, need_arg());
    } catch (const UserError& e) {
      fail(a, e.what());
    }
    if (name == "lt" || name == "<") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">") return c > 0;
    return c >= 0;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is(VK::Int) && !v.is(VK::Bool)) fail(a, "test '" + name + "' needs an integer");
    const int64_t d = name == "divisibleby" ? int_arg(&need_arg(), 1, a, "divisibleby") : 2;
    if (d == 0) fail(a, "divisibleby 0");
    const bool divisible = v.as_int() % d == 0;
    return name == "odd" ? !divisible : divisible;
  }
  if (name == "lower" || name == "upper") {
    const std::string s = v.str();
    return map_case(s, name == "upper") == s;
  }
  fail(a, "unsupported test '" + name + "'");
}

Value call_global(const std::string& name, const CallArgs& a) {
  if (name == "raise_exception") {
    const Value* msg = a.get(0, "message");
    throw TemplateError(a.line, "the chat template raised an error: " + (msg ? msg->str() : std::string()));
  }
  if (name == "namespace" || name == "dict") {
    Dict items;
    if (!a.positional.empty()) {
      if (a.positional.size() > 1 || !a.positional[0].is_mapping()) fail(a, name + "() takes one mapping argument");
      items = a.positional[0].as_dict();
    }
    for (const auto& kv : a.keyword) {
      auto it = std::find_if(items.begin(), items.end(), [&](const auto& x) { return x.first == kv.first; });
      if (it != items.end()) it->second = kv.second;
      else items.push_back(kv);
    }
    return name == "dict" ? Value::dict(std::move(items)) : Value::namespace_of(std::move(items));
  }
  if (name == "range") {
    int64_t start = 0, stop, step = 1;
    if (a.positional.empty() || a.positional.size() > 3) fail(a, "range() takes 1 to 3 integers");
    if (a.positional.size() == 1) {
      stop = int_arg(&a.positional[0], 0, a, "range");
    } else {
      start = int_arg(&a.positional[0], 0, a, "range");
      stop = int_arg(&a.positional[1], 0, a, "range");
      if (a.positional.size() == 3) step = int_arg(&a.positional[2], 1, a, "range");
    }
    if (step == 0) fail(a, "range() step must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      out.push_back(Value::integer(i));
      if (out.size() > 100000) fail(a, "range() too long");
    }
    return Value::list(std::move(out));
  }
  if (name == "strftime_now") {
    const Value* fmt = a.get(0, "format");
    if (!fmt) fail(a, "strftime_now needs a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, need_string(*fmt, a, "strftime_now").c_str(), &tm);
    return Value::string(std::string(buf, n));
  }
  fail(a, "unknown function '" + name + "'");
}

Value call_method(const Value& obj, const std::string& name, const CallArgs& a) {
  if (obj.is(VK::String)) {
    const std::string& s = obj.as_string();
    if (name == "startswith" || name == "endswith") {
      const Value* p = a.get(0, "prefix");
      if (!p) fail(a, name + " needs an argument");
      List options = p->is(VK::List) ? p->as_list() : List{*p};
      for (const Value& o : options) {
        const std::string& x = need_string(o, a, name.c_str());
        const bool hit = name == "startswith" ? s.compare(0, x.size(), x) == 0
                                              : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        if (hit) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "split" || name == "rsplit")
      return Value::list(split(s, a.get(0, "sep"), int_arg(a.get(1, "maxsplit"), -1, a, "maxsplit"), name == "rsplit", a));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const Value* chars = a.get(0, "chars");
      const std::string* set = chars && !chars->is(VK::None) ? &need_string(*chars, a, name.c_str()) : nullptr;
      return Value::string(strip(s, set, name != "rstrip", name != "lstrip"));
    }
    if (name == "replace") {
      const Value *from = a.get(0, "old"), *to = a.get(1, "new");
      if (!from || !to) fail(a, "replace needs two arguments");
      return Value::string(replace(s, need_string(*from, a, "replace"), need_string(*to, a, "replace"),
                                   int_arg(a.get(2, "count"), -1, a, "replace count")));
    }
    if (name == "lower" || name == "upper") return Value::string(map_case(s, name == "upper"));
    if (name == "title" || name == "capitalize") return apply_filter(name, obj, a);
    if (name == "find" || name == "rfind" || name == "count") {
      const Value* sub = a.get(0, "sub");
      if (!sub) fail(a, name + " needs an argument");
      const std::string& x = need_string(*sub, a, name.c_str());
      if (name == "count") {
        if (x.empty()) return Value::integer(int64_t(code_points(s).size()) + 1);
        int64_t n = 0;
        for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
        return Value::integer(n);
      }
      const size_t p = name == "find" ? s.find(x) : s.rfind(x);
      return Value::integer(p == std::string::npos ? -1 : int64_t(code_points(s.substr(0, p)).size()));
    }
    if (name == "join") {
      const Value* items = a.get(0, "iterable");
      if (!items) fail(a, "join needs an argument");
      std::string out;
      bool first = true;
      for (const Value& x : as_list(*items, a)) {
        if (!first) out += s;
        first = false;
        out += need_string(x, a, "join");
        check_string_size(out.size());
      }
      return Value::string(std::move(out));
    }
  } else if (obj.is(VK::Dict)) {
    if (name == "items") return apply_filter("items", obj, a);
    if (name == "keys") return Value::list(as_list(obj, a));
    if (name == "values") {
      List out;
      for (const auto& kv : obj.as_dict()) out.push_back(kv.second);
      return Value::list(std::move(out));
    }
    if (name == "get") {
      const Value* key = a.get(0, "key");
      if (!key) fail(a, "get needs a key");
      const Value* x = key->is(VK::String) ? obj.find(key->as_string()) : nullptr;
      const Value* dflt = a.get(1, "default");
      return x ? *x : dflt ? *dflt : Value::none();
    }
  }
  fail(a, std::string("unsupported method '") + obj.type_name() + "." + name + "'");
}

}  // namespace hone::jinja
