// The values a chat template computes with, and how Python (which runs jinja2 in transformers) prints, compares
// and serializes them: a chat template's output is Python's str() of its values, so "byte-identical to
// transformers" means following Python here, not C++.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hone::jinja {

class Value;
using List = std::vector<Value>;
// Insertion-ordered string-keyed map, like a Python dict built from JSON.
using Dict = std::vector<std::pair<std::string, Value>>;

class Value {
 public:
  // Undefined is jinja2's default Undefined: prints as "", is false, iterates as empty, fails on attribute access.
  // Namespace is namespace(): the one mutable value (set ns.x = ...), shared by reference.
  // Function is a global callable (raise_exception, namespace, strftime_now, range, dict) named by its string.
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Value() = default;
  static Value undefined(std::string name = "") { Value v; v.str_ = std::move(name); return v; }
  static Value none() { return of(Kind::None); }
  static Value boolean(bool b) { Value v = of(Kind::Bool); v.int_ = b; return v; }
  static Value integer(int64_t i) { Value v = of(Kind::Int); v.int_ = i; return v; }
  static Value number(double f) { Value v = of(Kind::Float); v.float_ = f; return v; }
  static Value string(std::string s) { Value v = of(Kind::String); v.str_ = std::move(s); return v; }
  // The containers throw TemplateError (line 0) past the limits of jinja_limits.h: nesting, list length, a
  // namespace inside a namespace.
  static Value list(List items, bool tuple = false);  // a tuple prints as (a, b)
  static Value dict(Dict items);
  static Value namespace_of(Dict items);
  static Value function(std::string name) { Value v = of(Kind::Function); v.str_ = std::move(name); return v; }

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  // Levels of lists and dicts in this value (0 for a scalar); bounded by kMaxNesting (jinja_limits.h) when built.
  int depth() const { return depth_; }
  // A namespace, or a list or dict with one inside: a namespace may not hold one (no cycles, no unbounded depth).
  bool holds_namespace() const { return holds_namespace_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // Int and Bool
  double as_double() const { return kind_ == Kind::Float ? float_ : double(int_); }
  const std::string& as_string() const { return str_; }  // String, Function name, Undefined's name
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_items() const { return *dict_; }  // Namespace only

  // Dict/Namespace key lookup; nullptr when absent.
  const Value* find(const std::string& key) const;

  bool truthy() const;        // Python's bool()
  std::string str() const;    // Python's str(); Undefined gives ""
  std::string repr() const;   // Python's repr()
  const char* type_name() const;  // for error messages, in Python's words

 private:
  static Value of(Kind k) { Value v; v.kind_ = k; return v; }
  void repr_into(std::string& out, int level) const;  // appends repr(), bounded in depth and length
  Kind kind_ = Kind::Undefined;
  bool tuple_ = false;
  bool holds_namespace_ = false;
  uint16_t depth_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
};

// Python's ==, and <, > ... for the types that order (numbers, strings, lists); throws on others.
bool equal(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // -1, 0, 1

// A string's code points (UTF-8 decoded), and the UTF-8 of one code point: Python's str indexing and iteration.
std::vector<uint32_t> code_points(const std::string& s);
std::string code_point_string(uint32_t cp);
// The items a for loop and list() walk: a list's items, a dict's keys, a string's characters, nothing for
// undefined. False (items untouched) when v is not iterable; each caller words that error its own way.
bool iterable_items(const Value& v, List& items);

// Python's repr() of a float ("1.0", "0.1", "1e-05", "1e+16").
std::string python_float(double f);
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none), as transformers' tojson filter calls it.
std::string to_json(const Value& v, int indent = -1, bool sort_keys = false);

}  // namespace hone::jinja
