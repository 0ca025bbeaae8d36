// The evaluator: statements write to one output string; expressions follow Python's operators on jinja2's values
// (and/or return an operand, + refuses mixed types, an undefined value fails when used, not when looked up).
#include "tokenizer/jinja_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "runtime/error.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_limits.h"
#include "tokenizer/utf8.h"

namespace hone::jinja {

namespace {

using K = Expr::Kind;
using VK = Value::Kind;

// hone's integers are 64-bit where Python's are unbounded: a result past them is a template error.
[[noreturn]] Value overflow(int line) { throw TemplateError(line, "integer overflow (hone's integers are 64-bit)"); }

[[noreturn]] void undefined_error(const Value& v, int line) {
  throw TemplateError(line, v.as_string().empty() ? "undefined value used" : v.as_string() + " is undefined");
}

// Python's slice indices for a sequence of n items.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int line) {
  auto as_index = [&](const Value& v, const char* what) -> int64_t {
    if (!v.is(VK::Int) && !v.is(VK::Bool)) throw TemplateError(line, std::string("slice ") + what + " must be an integer");
    return v.as_int();
  };
  const int64_t st = step.is(VK::None) ? 1 : as_index(step, "step");
  if (st == 0) throw TemplateError(line, "slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is(VK::None)) return dflt;
    int64_t i = as_index(v, "index");
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(start, st > 0 ? 0 : n - 1), e = clamp(stop, st > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) out.push_back(size_t(i));
  return out;
}

Value binary_op(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "~") return Value::string(a.str() + b.str());
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  const auto type_error = [&]() -> Value {
    throw TemplateError(line, "unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  if (op == "+") {
    if (a.is(VK::String) && b.is(VK::String)) return Value::string(a.as_string() + b.as_string());
    if (a.is(VK::List) && b.is(VK::List)) {
      List items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(items));
    }
  }
  if (op == "*") {
    const bool a_seq = a.is(VK::String) || a.is(VK::List), b_seq = b.is(VK::String) || b.is(VK::List);
    if ((a_seq && (b.is(VK::Int) || b.is(VK::Bool))) || (b_seq && (a.is(VK::Int) || a.is(VK::Bool)))) {
      const Value& seq = a_seq ? a : b;
      const int64_t n = a_seq ? b.as_int() : a.as_int();
      // A chat template repeats a separator a few times; a repetition past 64 MiB is a template error, not an
      // allocation without bound.
      const int64_t unit = seq.is(VK::String) ? int64_t(seq.as_string().size()) : int64_t(seq.as_list().size()) * 16;
      if (n > 0 && unit > 0 && n > (int64_t(64) << 20) / unit)
        throw TemplateError(line, "a repetition of " + std::to_string(n) + " copies is too large");
      if (seq.is(VK::String)) {
        std::string s;
        for (int64_t i = 0; i < n; ++i) s += seq.as_string();
        return Value::string(std::move(s));
      }
      List items;
      for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.as_list().begin(), seq.as_list().end());
      return Value::list(std::move(items));
    }
  }
  if (!a.is_number() || !b.is_number()) return type_error();
  const bool ints = !a.is(VK::Float) && !b.is(VK::Float);
  const double x = a.as_double(), y = b.as_double();
  if (op == "/") {
    if (y == 0) throw TemplateError(line, "division by zero");
    return Value::number(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) throw TemplateError(line, "division by zero");
    if (ints) {
      const int64_t p = a.as_int(), q = b.as_int();
      if (p == std::numeric_limits<int64_t>::min() && q == -1) overflow(line);
      int64_t d = p / q, m = p % q;
      if (m != 0 && ((m < 0) != (q < 0))) {
        --d;
        m += q;
      }
      return Value::integer(op == "//" ? d : m);
    }
    const double d = std::floor(x / y);
    return Value::number(op == "//" ? d : x - d * y);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {  // by squaring: a huge exponent of 0, 1 or -1 ends at once
      int64_t r = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; e >>= 1) {
        if ((e & 1) && __builtin_mul_overflow(r, base, &r)) overflow(line);
        if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow(line);
      }
      return Value::integer(r);
    }
    // Python raises where C's pow gives inf or nan: 0 ** -1, and a negative base to a fractional power (complex).
    if (x == 0 && y < 0) throw TemplateError(line, "0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y))
      throw TemplateError(line, "a negative number raised to a fractional power is complex (unsupported)");
    return Value::number(std::pow(x, y));
  }
  if (ints) {
    int64_t r = 0;
    if (op == "+") return __builtin_add_overflow(a.as_int(), b.as_int(), &r) ? overflow(line) : Value::integer(r);
    if (op == "-") return __builtin_sub_overflow(a.as_int(), b.as_int(), &r) ? overflow(line) : Value::integer(r);
    if (op == "*") return __builtin_mul_overflow(a.as_int(), b.as_int(), &r) ? overflow(line) : Value::integer(r);
  } else {
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
  }
  return type_error();
}

bool contains(const Value& container, const Value& item, int line) {
  switch (container.kind()) {
    case VK::Undefined: return false;
    case VK::String:
      if (!item.is(VK::String))
        throw TemplateError(line, std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case VK::List:
      for (const Value& v : container.as_list())
        if (equal(v, item)) return true;
      return false;
    case VK::Dict:
    case VK::Namespace: return item.is(VK::String) && container.find(item.as_string()) != nullptr;
    default: throw TemplateError(line, std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

bool compare_op(const std::string& op, const Value& a, const Value& b, int line) {
  if (op == "==") return equal(a, b);
  if (op == "!=") return !equal(a, b);
  if (op == "in") return contains(b, a, line);
  if (op == "notin") return !contains(b, a, line);
  if (a.is_undefined()) undefined_error(a, line);
  if (b.is_undefined()) undefined_error(b, line);
  int c;
  try {
    c = compare(a, b);
  } catch (const UserError& e) {
    throw TemplateError(line, e.what());
  }
  if (op == "<") return c < 0;
  if (op == ">") return c > 0;
  if (op == "<=") return c <= 0;
  return c >= 0;
}

// The items a for loop walks: list items, dict keys, string characters.
List iterate(const Value& v, int line) {
  List items;
  if (!iterable_items(v, items)) throw TemplateError(line, std::string("'") + v.type_name() + "' object is not iterable");
  return items;
}

class Evaluator {
 public:
  explicit Evaluator(const Dict& variables) {
    frames_.emplace_back();
    for (const auto& [k, v] : variables) frames_.back()[k] = v;
  }

  std::string run(const Body& body) {
    exec(body);
    return std::move(out_);
  }

  // The work of a value an expression built: its text and list items (names and literals are charged 1).
  static int64_t cost(const Value& v) {
    if (v.is(VK::String)) return int64_t(v.as_string().size() / 256);
    if (v.is(VK::List)) return int64_t(v.as_list().size() / 8);
    return 0;
  }

  // Limits met where no line is known (jinja_limits.h, jinja_value.cpp) get the line of the construct.
  [[noreturn]] static void rethrow_at(const TemplateError& e, int line) {
    if (e.line() == 0) throw TemplateError(line, e.message());
    throw e;
  }

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body) {
    for (const Node& n : body) {
      const Flow f = exec(n);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Node& n) {
    try {
      RenderBudget::charge(1);
      return exec_node(n);
    } catch (const TemplateError& e) {
      rethrow_at(e, n.line);
    }
  }

  void emit(const std::string& text) {
    check_string_size(out_.size() + text.size());
    RenderBudget::charge(int64_t(text.size() / 256));
    out_ += text;
  }

  Flow exec_node(const Node& n) {
    switch (n.kind) {
      case Node::Kind::Text: emit(n.text); break;
      case Node::Kind::Output: emit(eval(*n.expr).str()); break;
      case Node::Kind::If:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond).truthy()) return exec(body);
        break;
      case Node::Kind::For: exec_for(n); break;
      case Node::Kind::Set: {
        Value v = eval(*n.expr);
        if (n.attr.empty()) {
          frames_.back()[n.targets[0]] = std::move(v);
          break;
        }
        const Value ns = lookup(n.targets[0]);
        if (!ns.is(VK::Namespace)) throw TemplateError(n.line, "cannot assign attribute on non-namespace object");
        if (v.holds_namespace()) throw TemplateError(n.line, "a namespace cannot hold another namespace (hone's limit)");
        Dict& items = ns.namespace_items();
        bool found = false;
        for (auto& kv : items)
          if (kv.first == n.attr) {
            kv.second = v;
            found = true;
          }
        if (!found) items.emplace_back(n.attr, std::move(v));
        break;
      }
      case Node::Kind::SetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        exec(n.body);
        frames_.back()[n.targets[0]] = Value::string(std::move(out_));
        out_ = std::move(saved);
        break;
      }
      case Node::Kind::Break: return Flow::Break;
      case Node::Kind::Continue: return Flow::Continue;
      case Node::Kind::Generation: return exec(n.body);
    }
    return Flow::Normal;
  }

  void bind(const Node& n, const Value& item, std::map<std::string, Value>& frame) {
    if (n.targets.size() == 1) {
      frame[n.targets[0]] = item;
      return;
    }
    const List parts = iterate(item, n.line);
    if (parts.size() != n.targets.size())
      throw TemplateError(n.line, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                                      std::to_string(n.targets.size()) + " loop variables");
    for (size_t k = 0; k < parts.size(); ++k) frame[n.targets[k]] = parts[k];
  }

  void exec_for(const Node& n) {
    List items = iterate(eval(*n.expr), n.line);
    if (n.filter) {
      List kept;
      for (const Value& item : items) {
        RenderBudget::charge(1);
        frames_.emplace_back();
        bind(n, item, frames_.back());
        const bool keep = eval(*n.filter).truthy();
        frames_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t len = int64_t(items.size());
    for (int64_t i = 0; i < len; ++i) {
      RenderBudget::charge(1);
      frames_.emplace_back();
      auto& frame = frames_.back();
      bind(n, items[size_t(i)], frame);
      frame["loop"] = Value::dict({{"index", Value::integer(i + 1)},
                                   {"index0", Value::integer(i)},
                                   {"revindex", Value::integer(len - i)},
                                   {"revindex0", Value::integer(len - i - 1)},
                                   {"first", Value::boolean(i == 0)},
                                   {"last", Value::boolean(i == len - 1)},
                                   {"length", Value::integer(len)},
                                   {"depth", Value::integer(1)},
                                   {"depth0", Value::integer(0)},
                                   {"previtem", i > 0 ? items[size_t(i - 1)] : Value::undefined("loop.previtem")},
                                   {"nextitem", i + 1 < len ? items[size_t(i + 1)] : Value::undefined("loop.nextitem")}});
      const Flow f = exec(n.body);
      frames_.pop_back();
      if (f == Flow::Break) break;
    }
    if (len == 0) exec(n.else_body);
  }

  Value lookup(const std::string& name) const {
    for (size_t k = frames_.size(); k-- > 0;) {
      auto it = frames_[k].find(name);
      if (it != frames_[k].end()) return it->second;
    }
    if (is_global_function(name)) return Value::function(name);
    return Value::undefined("'" + name + "'");
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs a;
    a.line = e.line;
    for (size_t k = first; k < e.args.size(); ++k) a.positional.push_back(eval(*e.args[k]));
    for (const auto& [name, x] : e.kwargs) a.keyword.emplace_back(name, eval(*x));
    return a;
  }

  Value attribute(const Value& obj, const std::string& name, int line) {
    if (obj.is_undefined()) undefined_error(obj, line);
    if (const Value* v = obj.find(name)) return *v;
    return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute '" + name + "'");
  }

  Value item(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) undefined_error(obj, line);
    if (obj.is_mapping()) {
      if (key.is(VK::String))
        if (const Value* v = obj.find(key.as_string())) return *v;
      return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + key.repr());
    }
    if ((obj.is(VK::List) || obj.is(VK::String)) && (key.is(VK::Int) || key.is(VK::Bool))) {
      std::vector<uint32_t> cps;
      if (obj.is(VK::String)) cps = code_points(obj.as_string());
      const int64_t n = obj.is(VK::List) ? int64_t(obj.as_list().size()) : int64_t(cps.size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(std::string(obj.type_name()) + " index out of range");
      return obj.is(VK::List) ? obj.as_list()[size_t(i)] : Value::string(code_point_string(cps[size_t(i)]));
    }
    return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + key.repr());
  }

  Value eval(const Expr& e) {
    try {
      if (e.kind == K::Literal) return e.value;
      if (e.kind == K::Name) return lookup(e.name);
      Value v = eval_node(e);
      RenderBudget::charge(1 + cost(v));
      if (v.is(VK::String)) check_string_size(v.as_string().size());
      return v;
    } catch (const TemplateError& err) {
      rethrow_at(err, e.line);
    }
  }

  Value eval_node(const Expr& e) {
    switch (e.kind) {
      case K::Literal: return e.value;
      case K::Name: return lookup(e.name);
      case K::ListLit: {
        List items;
        for (const auto& x : e.args) items.push_back(eval(*x));
        return Value::list(std::move(items), e.name == "tuple");
      }
      case K::DictLit: {
        Dict items;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const Value key = eval(*e.args[k]);
          if (!key.is(VK::String)) throw TemplateError(e.line, "dictionary keys must be strings");
          Value v = eval(*e.args[k + 1]);
          bool replaced = false;
          for (auto& kv : items)
            if (kv.first == key.as_string()) {
              kv.second = v;
              replaced = true;
            }
          if (!replaced) items.emplace_back(key.as_string(), std::move(v));
        }
        return Value::dict(std::move(items));
      }
      case K::Attr: return attribute(eval(*e.args[0]), e.name, e.line);
      case K::Item: return item(eval(*e.args[0]), eval(*e.args[1]), e.line);
      case K::Slice: {
        const Value obj = eval(*e.args[0]);
        Value parts[3];
        for (int k = 0; k < 3; ++k) parts[k] = e.args[size_t(k) + 1] ? eval(*e.args[size_t(k) + 1]) : Value::none();
        if (obj.is(VK::List)) {
          List out;
          for (size_t i : slice_indices(int64_t(obj.as_list().size()), parts[0], parts[1], parts[2], e.line))
            out.push_back(obj.as_list()[i]);
          return Value::list(std::move(out));
        }
        if (obj.is(VK::String)) {
          const auto cps = code_points(obj.as_string());
          std::string out;
          for (size_t i : slice_indices(int64_t(cps.size()), parts[0], parts[1], parts[2], e.line))
            tok::utf8_append(out, cps[i]);
          return Value::string(std::move(out));
        }
        if (obj.is_undefined()) undefined_error(obj, e.line);
        throw TemplateError(e.line, std::string("'") + obj.type_name() + "' object is not subscriptable");
      }
      case K::Call: {
        const Expr& callee = *e.args[0];
        if (callee.kind == K::Attr) {
          const Value obj = eval(*callee.args[0]);
          if (obj.is(VK::String) || obj.is(VK::Dict) || obj.is(VK::List))
            return call_method(obj, callee.name, eval_args(e, 1));
          if (obj.is_undefined()) undefined_error(obj, e.line);
        }
        const Value f = eval(callee);
        if (f.is(VK::Function)) return call_global(f.as_string(), eval_args(e, 1));
        if (f.is_undefined()) undefined_error(f, e.line);
        throw TemplateError(e.line, std::string("'") + f.type_name() + "' object is not callable");
      }
      case K::Filter: return apply_filter(e.name, eval(*e.args[0]), eval_args(e, 1));
      case K::Test: return Value::boolean(apply_test(e.name, eval(*e.args[0]), eval_args(e, 1)) != e.negate);
      case K::Unary: {
        const Value v = eval(*e.args[0]);
        if (v.is_undefined()) undefined_error(v, e.line);
        if (!v.is_number()) throw TemplateError(e.line, std::string("bad operand type for unary ") + e.name + ": '" + v.type_name() + "'");
        if (e.name == "+") return v.is(VK::Bool) ? Value::integer(v.as_int()) : v;
        return v.is(VK::Float) ? Value::number(-v.as_double()) : Value::integer(-v.as_int());
      }
      case K::Not: return Value::boolean(!eval(*e.args[0]).truthy());
      case K::And: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? eval(*e.args[1]) : a;
      }
      case K::Or: {
        Value a = eval(*e.args[0]);
        return a.truthy() ? a : eval(*e.args[1]);
      }
      case K::Binary: return binary_op(e.name, eval(*e.args[0]), eval(*e.args[1]), e.line);
      case K::Compare: {
        Value left = eval(*e.args[0]);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k + 1]);
          if (!compare_op(e.ops[k], left, right, e.line)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case K::Cond:
        if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
        return e.args[2] ? eval(*e.args[2]) : Value::undefined();
    }
    return Value::undefined();
  }

  std::vector<std::map<std::string, Value>> frames_;
  std::string out_;
};

}  // namespace

std::string render(const Body& body, const Dict& variables) {
  const RenderBudget budget;
  return Evaluator(variables).run(body);
}

}  // namespace hone::jinja
