// jinja2's lexer for chat templates: the root scan for {{ {% {#, the whitespace control of -, + and the
// environment's trim_blocks / lstrip_blocks, and the tokens inside tags.
#include "tokenizer/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "tokenizer/jinja_error.h"
#include "tokenizer/utf8.h"

namespace hone::jinja {

namespace {

using T = Token::Type;

// Python's \s on str: the whitespace characters of str.isspace().
bool is_space_at(const std::string& s, size_t i, size_t* len) {
  size_t j = i;
  const uint32_t cp = tok::utf8_next(s, j);
  *len = j - i;
  return tok::py_isspace(cp);
}

size_t skip_space(const std::string& s, size_t i) {
  size_t len = 0;
  while (i < s.size() && is_space_at(s, i, &len)) i += len;
  return i;
}

bool all_space(const std::string& s, size_t from) {
  return from < s.size() && skip_space(s, from) == s.size();
}

int count_newlines(const std::string& s, size_t from, size_t to) {
  int n = 0;
  for (size_t i = from; i < to && i < s.size(); ++i) n += s[i] == '\n';
  return n;
}

// The source as jinja2 sees it: \r\n and \r become \n, one trailing newline is dropped (keep_trailing_newline off).
std::string normalize_source(const std::string& in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal's body, which is what jinja2 applies.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    switch (c) {
      case '\n': break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t k = 0; k < n; ++k) {
          const int h = i + 1 + k < body.size() ? hex_value(body[i + 1 + k]) : -1;
          if (h < 0) throw TemplateError(line, std::string("truncated \\") + c + " escape in a string");
          cp = cp * 16 + uint32_t(h);
        }
        if (cp > 0x10FFFF) throw TemplateError(line, "illegal Unicode character in a string escape");
        i += n;
        tok::utf8_append(out, cp);
        break;
      }
      case 'N': throw TemplateError(line, "\\N{...} escapes in strings are not supported");
      default:
        if (c >= '0' && c <= '7') {
          uint32_t cp = uint32_t(c - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            cp = cp * 8 + uint32_t(body[++i] - '0');
          tok::utf8_append(out, cp);
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(",
                                  ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};

class Lexer {
 public:
  explicit Lexer(const std::string& source) : s_(normalize_source(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t start = next_tag(pos_);
      if (start == std::string::npos) {
        emit(T::Text, s_.substr(pos_));
        line_ += count_newlines(s_, pos_, s_.size());
        break;
      }
      const char kind = s_[start + 1];
      const char control = start + 2 < s_.size() ? s_[start + 2] : '\0';
      std::string text = s_.substr(pos_, start - pos_);
      const int text_newlines = count_newlines(text, 0, text.size());
      if (control == '-') {
        text = std::string(tok::py_rstrip(text));
      } else if (control != '+' && kind != '{') {  // lstrip_blocks: a block or comment tag alone on its line
        const size_t line_begin = text.rfind('\n') + 1;  // npos + 1 == 0
        if ((line_begin > 0 || line_starting_) && all_space(text, line_begin)) text.resize(line_begin);
      }
      if (!text.empty()) emit(T::Text, text);
      line_ += text_newlines;
      pos_ = start + 2 + (control == '-' || control == '+');
      if (kind == '#') {
        comment();
      } else {
        tag(kind == '{');
      }
    }
    emit(T::End, "");
    return std::move(tokens_);
  }

 private:
  // The first "{{", "{%" or "{#" at or after from: one scan (three finds to the end of the text for each tag
  // made a template of 100,000 tags quadratic).
  size_t next_tag(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos && i + 1 < s_.size(); i = s_.find('{', i + 1))
      if (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#') return i;
    return std::string::npos;
  }

  void emit(T type, std::string text) { tokens_.push_back({type, std::move(text), line_}); }

  // After a block or comment end: "-" eats all whitespace, "+" nothing, plain one newline (trim_blocks).
  void after_block_end(char control) {
    const size_t from = pos_;
    if (control == '-') {
      pos_ = skip_space(s_, pos_);
    } else if (control != '+' && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_newlines(s_, from, pos_);
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  void comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos) throw TemplateError(line_, "missing end of comment tag");
    const char control = end > pos_ && (s_[end - 1] == '-' || s_[end - 1] == '+') ? s_[end - 1] : '\0';
    line_ += count_newlines(s_, pos_, end);
    pos_ = end + 2;
    line_starting_ = false;
    after_block_end(control);
  }

  bool at(const char* p) const { return s_.compare(pos_, std::strlen(p), p) == 0; }

  void tag(bool variable) {
    const int open_line = line_;
    emit(variable ? T::VarBegin : T::BlockBegin, "");
    if (!variable) {
      const size_t word = skip_space(s_, pos_);
      if (s_.compare(word, 3, "raw") == 0 && (word + 3 == s_.size() || !std::isalnum((unsigned char)s_[word + 3])))
        throw TemplateError(line_, "unsupported tag 'raw'");
    }
    int depth = 0;
    for (;;) {
      if (pos_ >= s_.size()) throw TemplateError(open_line, variable ? "missing end of '{{' tag" : "missing end of '{%' tag");
      if (depth == 0) {
        const char* close = variable ? "}}" : "%}";
        if (at(close) || ((s_[pos_] == '-' || (!variable && s_[pos_] == '+')) && s_.compare(pos_ + 1, 2, close) == 0)) {
          const char control = at(close) ? '\0' : s_[pos_];
          pos_ += control ? 3 : 2;
          emit(variable ? T::VarEnd : T::BlockEnd, "");
          if (variable) {
            const size_t from = pos_;
            if (control == '-') pos_ = skip_space(s_, pos_);
            line_ += count_newlines(s_, from, pos_);
            line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
          } else {
            after_block_end(control);
          }
          return;
        }
      }
      size_t len = 0;
      if (is_space_at(s_, pos_, &len)) {
        line_ += s_[pos_] == '\n';
        pos_ += len;
        continue;
      }
      const char c = s_[pos_];
      if (std::isalpha((unsigned char)c) || c == '_') {
        size_t e = pos_;
        while (e < s_.size() && (std::isalnum((unsigned char)s_[e]) || s_[e] == '_')) ++e;
        emit(T::Name, s_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (std::isdigit((unsigned char)c)) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        const char* op = nullptr;
        for (const char* o : kOperators)
          if (at(o)) {
            op = o;
            break;
          }
        if (!op) throw TemplateError(line_, std::string("unexpected character '") + c + "'");
        const std::string o = op;
        if (o == "(" || o == "[" || o == "{") ++depth;
        if (o == ")" || o == "]" || o == "}") {
          if (depth == 0) throw TemplateError(line_, "unexpected '" + o + "'");
          --depth;
        }
        emit(T::Op, o);
        pos_ += o.size();
      }
    }
  }

  void number() {
    auto digits = [&](size_t e) {
      while (e < s_.size() && (std::isdigit((unsigned char)s_[e]) || (s_[e] == '_' && e + 1 < s_.size() && std::isdigit((unsigned char)s_[e + 1])))) ++e;
      return e;
    };
    size_t e = digits(pos_);
    bool is_float = false;
    const bool after_dot = !tokens_.empty() && tokens_.back().type == T::Op && tokens_.back().text == ".";
    if (!after_dot && e + 1 < s_.size() && s_[e] == '.' && std::isdigit((unsigned char)s_[e + 1])) {
      e = digits(e + 1);
      is_float = true;
    }
    if (!after_dot && e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t x = e + 1;
      if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
      if (x < s_.size() && std::isdigit((unsigned char)s_[x])) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (s_[i] != '_') text += s_[i];
    emit(is_float ? T::Float : T::Int, text);
    pos_ = e;
  }

  void string_literal(char quote) {
    size_t e = pos_ + 1;
    while (e < s_.size() && s_[e] != quote) e += s_[e] == '\\' ? 2 : 1;
    if (e >= s_.size()) throw TemplateError(line_, "unterminated string");
    const std::string body = s_.substr(pos_ + 1, e - pos_ - 1);
    emit(T::String, unescape(body, line_));
    line_ += count_newlines(body, 0, body.size());
    pos_ = e + 1;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(source).run(); }

}  // namespace hone::jinja
