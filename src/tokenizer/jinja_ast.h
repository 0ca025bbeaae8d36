// The parsed form of a chat template: expressions and statements of the jinja subset hone renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace hone::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    ListLit,   // args: items; name "tuple" for a tuple
    DictLit,   // args: key, value, key, value ...
    Attr,      // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts are absent)
    Call,      // args[0](args[1:], kwargs)
    Filter,    // args[0] | name(args[1:], kwargs)
    Test,      // args[0] is [not] name(args[1:]); negate
    Unary,     // name ("-", "+") args[0]
    Not,       // not args[0]
    And,       // args[0] and args[1]
    Or,        // args[0] or args[1]
    Binary,    // args[0] name args[1]: + - * / // % ** ~
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: == != < > <= >= in notin
    Cond,      // args[0] if args[1] else args[2] (args[2] null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // levels of this expression tree: 1 for a leaf (the parser bounds it, jinja_limits.h)
  Value value;
  std::string name;
  bool negate = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;

  Expr(Kind k, int l) : kind(k), line(l) {}
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind {
    Text,        // text
    Output,      // {{ expr }}
    If,          // branches: (condition, body); the else branch has a null condition
    For,         // for targets in expr [if filter]: body [else: else_body]
    Set,         // set targets[0][.attr] = expr
    SetBlock,    // set targets[0] %} body {% endset
    Break,
    Continue,
    Generation,  // {% generation %} body {% endgeneration %}: transformers' marker, renders its body
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;

  Node(Kind k, int l) : kind(k), line(l) {}
};

}  // namespace hone::jinja
