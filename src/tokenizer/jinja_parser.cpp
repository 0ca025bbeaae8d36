// Recursive-descent parser following jinja2's grammar: condexpr > or > and > not > compare > + - > ~ > * / // % >
// ** > unary > primary with postfix (. [] ()) and filter/test suffixes, and the statements chat templates use.
#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <set>

#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_limits.h"

namespace hone::jinja {

namespace {

using T = Token::Type;
using K = Expr::Kind;

ExprPtr make(K kind, int line) { return std::make_unique<Expr>(kind, line); }

std::string too_deep() { return nesting_limit_message(); }

// A composite expression, finished: its depth from its operands', refused past the limit. Every node the parser
// builds passes here, so no tree deeper than the limit exists for the evaluator (or the destructor) to recurse on.
ExprPtr sealed(ExprPtr e) {
  int depth = 0;
  for (const ExprPtr& a : e->args)
    if (a) depth = std::max(depth, a->depth);
  for (const auto& kv : e->kwargs) depth = std::max(depth, kv.second->depth);
  e->depth = depth + 1;
  if (e->depth > kMaxNesting) throw TemplateError(e->line, too_deep());
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    std::string end;
    Body body = parse_body({}, &end);
    return body;
  }

 private:
  const Token& cur() const { return t_[pos_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == T::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == T::Name && cur().text == name; }
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError(cur().line, message); }

  // One level of a construct the parser recurses into (a statement's body, a nested expression): the recursion
  // is bounded by kMaxNesting.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) p_.fail(too_deep());
    }
    ~Nest() { --p_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  std::string describe(const Token& tok) const {
    switch (tok.type) {
      case T::VarEnd: return "end of print statement '}}'";
      case T::BlockEnd: return "end of statement block '%}'";
      case T::End: return "end of template";
      case T::String: return "string";
      default: return "'" + tok.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  void expect(T type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != T::Name) fail("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    next();
    return n;
  }

  // Statements up to one of the end tags (a BlockBegin followed by one of these names); *end gets the name.
  Body parse_body(const std::set<std::string>& ends, std::string* end) {
    Body body;
    for (;;) {
      const Token& tok = cur();
      if (tok.type == T::End) {
        for (const std::string& e : ends)
          if (e.rfind("end", 0) == 0) fail("unexpected end of template, expected '" + e + "'");
        return body;
      }
      if (tok.type == T::Text) {
        Node n(Node::Kind::Text, tok.line);
        n.text = tok.text;
        body.push_back(std::move(n));
        next();
      } else if (tok.type == T::VarBegin) {
        Node n(Node::Kind::Output, tok.line);
        next();
        n.expr = parse_tuple();
        expect(T::VarEnd, "'}}'");
        body.push_back(std::move(n));
      } else if (tok.type == T::BlockBegin) {
        next();
        if (cur().type != T::Name) fail("expected a statement name, got " + describe(cur()));
        const std::string name = cur().text;
        if (ends.count(name)) {
          *end = name;
          next();
          return body;
        }
        body.push_back(parse_statement(name));
      } else {
        fail("unexpected " + describe(tok));
      }
    }
  }

  Node parse_statement(const std::string& name) {
    const Nest nest(*this);
    const int line = cur().line;
    next();
    if (name == "if") {
      Node n(Node::Kind::If, line);
      for (;;) {
        ExprPtr cond = parse_tuple();
        expect(T::BlockEnd, "'%}'");
        std::string end;
        Body body = parse_body({"elif", "else", "endif"}, &end);
        n.branches.emplace_back(std::move(cond), std::move(body));
        if (end == "elif") continue;
        if (end == "else") {
          expect(T::BlockEnd, "'%}'");
          Body else_body = parse_body({"endif"}, &end);
          n.branches.emplace_back(nullptr, std::move(else_body));
        }
        expect(T::BlockEnd, "'%}'");
        return n;
      }
    }
    if (name == "for") {
      Node n(Node::Kind::For, line);
      n.targets.push_back(expect_name());
      while (is_op(",")) {
        next();
        n.targets.push_back(expect_name());
      }
      if (!is_name("in")) fail("expected 'in' in the for statement, got " + describe(cur()));
      next();
      n.expr = parse_or();  // jinja2: no conditional expression here, a trailing "if" filters the loop
      if (is_name("if")) {
        next();
        n.filter = parse_expression();
      }
      if (is_name("recursive")) fail("unsupported construct: recursive for loops");
      expect(T::BlockEnd, "'%}'");
      std::string end;
      n.body = parse_body({"else", "endfor"}, &end);
      if (end == "else") {
        expect(T::BlockEnd, "'%}'");
        n.else_body = parse_body({"endfor"}, &end);
      }
      expect(T::BlockEnd, "'%}'");
      return n;
    }
    if (name == "set") {
      const std::string target = expect_name();
      if (is_op(",")) fail("unsupported construct: set with several targets");
      if (is_op(".")) {
        next();
        Node n(Node::Kind::Set, line);
        n.targets.push_back(target);
        n.attr = expect_name();
        expect_op("=");
        n.expr = parse_tuple();
        expect(T::BlockEnd, "'%}'");
        return n;
      }
      if (is_op("=")) {
        next();
        Node n(Node::Kind::Set, line);
        n.targets.push_back(target);
        n.expr = parse_tuple();
        expect(T::BlockEnd, "'%}'");
        return n;
      }
      if (is_op("|")) fail("unsupported construct: filtered set block");
      expect(T::BlockEnd, "'%}'");
      Node n(Node::Kind::SetBlock, line);
      n.targets.push_back(target);
      std::string end;
      n.body = parse_body({"endset"}, &end);
      expect(T::BlockEnd, "'%}'");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(T::BlockEnd, "'%}'");
      return Node(name == "break" ? Node::Kind::Break : Node::Kind::Continue, line);
    }
    if (name == "generation") {
      expect(T::BlockEnd, "'%}'");
      Node n(Node::Kind::Generation, line);
      std::string end;
      n.body = parse_body({"endgeneration"}, &end);
      expect(T::BlockEnd, "'%}'");
      return n;
    }
    throw TemplateError(line, "unsupported tag '" + name + "'");
  }

  // parse_tuple of jinja2 for {{ }} and set values: "a, b" is a tuple (a list here).
  ExprPtr parse_tuple() {
    const int line = cur().line;
    ExprPtr first = parse_expression();
    if (!is_op(",")) return first;
    ExprPtr list = make(K::ListLit, line);
    list->name = "tuple";
    list->args.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (cur().type == T::VarEnd || cur().type == T::BlockEnd || is_op(")")) break;
      list->args.push_back(parse_expression());
    }
    return sealed(std::move(list));
  }

  ExprPtr parse_expression() {
    const Nest nest(*this);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      ExprPtr cond = make(K::Cond, line);
      ExprPtr test = parse_or();
      ExprPtr otherwise;
      if (is_name("else")) {
        next();
        otherwise = parse_expression();
      }
      cond->args.push_back(std::move(expr));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(otherwise));
      expr = sealed(std::move(cond));
    }
    return expr;
  }

  ExprPtr binary(K kind, ExprPtr a, ExprPtr b, int line, std::string op = "") {
    ExprPtr e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return sealed(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      next();
      left = binary(K::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      next();
      left = binary(K::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      const Nest nest(*this);
      ExprPtr e = make(K::Not, cur().line);
      next();
      e->args.push_back(parse_not());
      return sealed(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == T::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == ">" ||
                                  cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == T::Name && peek().text == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(K::Compare, line);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? sealed(std::move(cmp)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      left = binary(K::Binary, std::move(left), parse_concat(), line, op);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      next();
      left = binary(K::Binary, std::move(left), parse_math2(), line, "~");
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      const int line = cur().line;
      next();
      left = binary(K::Binary, std::move(left), parse_pow(), line, op);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      left = binary(K::Binary, std::move(left), parse_unary(true), line, "**");
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Nest nest(*this);
      node = make(K::Unary, cur().line);
      node->name = cur().text;
      next();
      node->args.push_back(parse_unary(false));
      node = sealed(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    if (tok.type == T::Name) {
      ExprPtr e = make(K::Literal, line);
      const std::string& n = tok.text;
      if (n == "true" || n == "True") {
        e->value = Value::boolean(true);
      } else if (n == "false" || n == "False") {
        e->value = Value::boolean(false);
      } else if (n == "none" || n == "None") {
        e->value = Value::none();
      } else {
        e = make(K::Name, line);
        e->name = n;
      }
      next();
      return e;
    }
    if (tok.type == T::String) {
      std::string s;
      while (cur().type == T::String) {  // adjacent literals concatenate
        s += cur().text;
        next();
      }
      ExprPtr e = make(K::Literal, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (tok.type == T::Int || tok.type == T::Float) {
      ExprPtr e = make(K::Literal, line);
      try {
        e->value = tok.type == T::Int ? Value::integer(std::stoll(tok.text)) : Value::number(std::stod(tok.text));
      } catch (const std::exception&) {
        fail("number out of range: " + tok.text);
      }
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      if (is_op(")")) {
        next();
        ExprPtr empty = make(K::ListLit, line);
        empty->name = "tuple";
        return empty;
      }
      ExprPtr e = parse_tuple();
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      ExprPtr e = make(K::ListLit, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expression());
      }
      next();
      return sealed(std::move(e));
    }
    if (is_op("{")) {
      next();
      ExprPtr e = make(K::DictLit, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expression());
        expect_op(":");
        e->args.push_back(parse_expression());
      }
      next();
      return sealed(std::move(e));
    }
    fail("unexpected " + describe(tok));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().type == T::Int) {
          ExprPtr e = make(K::Item, line);
          ExprPtr key = make(K::Literal, line);
          try {
            key->value = Value::integer(std::stoll(cur().text));
          } catch (const std::exception&) {
            fail("index out of range: " + cur().text);
          }
          next();
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(key));
          node = sealed(std::move(e));
        } else {
          ExprPtr e = make(K::Attr, line);
          e->name = expect_name();
          e->args.push_back(std::move(node));
          node = sealed(std::move(e));
        }
      } else if (is_op("[")) {
        next();
        node = parse_subscript(std::move(node), line);
      } else if (is_op("(")) {
        node = parse_call(std::move(node), K::Call, "");
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node, int line) {
    ExprPtr parts[3];
    bool slice = false;
    for (int k = 0; k < 3; ++k) {
      if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
      if (k < 2 && is_op(":")) {
        slice = true;
        next();
      } else {
        break;
      }
    }
    expect_op("]");
    ExprPtr e = make(slice ? K::Slice : K::Item, line);
    e->args.push_back(std::move(node));
    if (!slice) {
      if (!parts[0]) fail("expected a subscript");
      e->args.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) e->args.push_back(std::move(p));
    }
    return sealed(std::move(e));
  }

  // "(args, name=value ...)" after a callee, a filter or a test; node becomes args[0].
  ExprPtr parse_call(ExprPtr node, K kind, const std::string& name) {
    ExprPtr e = make(kind, cur().line);
    e->name = name;
    e->args.push_back(std::move(node));
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("unsupported construct: *args / **kwargs in a call");
      if (cur().type == T::Name && peek().type == T::Op && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        e->kwargs.emplace_back(std::move(key), parse_expression());
      } else {
        if (!e->kwargs.empty()) fail("positional argument after a keyword argument");
        e->args.push_back(parse_expression());
      }
    }
    next();
    return sealed(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        next();
        const int line = cur().line;
        const std::string name = expect_name();
        if (!known_filter(name)) throw TemplateError(line, "unsupported filter '" + name + "'");
        if (is_op("(")) {
          node = parse_call(std::move(node), K::Filter, name);
        } else {
          ExprPtr e = make(K::Filter, line);
          e->name = name;
          e->args.push_back(std::move(node));
          node = sealed(std::move(e));
        }
      } else if (is_name("is")) {
        next();
        bool negate = false;
        if (is_name("not")) {
          negate = true;
          next();
        }
        const int line = cur().line;
        std::string name;
        if (cur().type == T::Name) {
          name = cur().text;
        } else if (cur().type == T::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                           cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
          name = cur().text;
        } else {
          fail("expected a test name after 'is', got " + describe(cur()));
        }
        next();
        if (!known_test(name)) throw TemplateError(line, "unsupported test '" + name + "'");
        if (is_op("(")) {
          node = parse_call(std::move(node), K::Test, name);
        } else {
          ExprPtr e = make(K::Test, line);
          e->name = name;
          e->args.push_back(std::move(node));
          const Token& c = cur();
          const bool arg_follows =
              (c.type == T::Name || c.type == T::String || c.type == T::Int || c.type == T::Float ||
               (c.type == T::Op && (c.text == "(" || c.text == "[" || c.text == "{"))) &&
              !(c.type == T::Name && (c.text == "else" || c.text == "or" || c.text == "and"));
          if (arg_follows) e->args.push_back(parse_postfix(parse_primary()));
          node = sealed(std::move(e));
        }
        node->negate = negate;
      } else if (is_op("(")) {
        node = parse_call(std::move(node), K::Call, "");
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(lex(source)).parse(); }

}  // namespace hone::jinja
