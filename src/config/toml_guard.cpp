// The pre-scan of TOML text (see toml_guard.h). It follows just enough of TOML to skip strings and
// comments; whatever it lets through is still parsed (and refused, when malformed) by TOML++.
#include "config/toml_guard.h"

#include <cctype>

#include "runtime/error.h"

namespace hone {

namespace {

// Whether the backslash at text[i] ends its line: only spaces, tabs and a carriage return before the newline.
bool line_ending_backslash(const std::string& text, size_t i) {
  for (size_t k = i + 1; k < text.size(); ++k) {
    if (text[k] == '\n') return true;
    if (text[k] != ' ' && text[k] != '\t' && text[k] != '\r') return false;
  }
  return false;
}

}  // namespace

std::string toml_guard_problem(const std::string& text) {
  int line = 1;
  size_t line_start = 0;
  int key_parts = 1;  // parts of the dotted key (or number) being read
  int depth = 0;      // open '[' and '{'
  auto where = [&](size_t i) { return cat(line, ":", i - line_start + 1); };
  const size_t bom = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark: TOML++ skips it
  for (size_t i = bom; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      key_parts = 1;
      continue;
    }
    if (c == '#') {  // a comment runs to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {  // a string: skipped whole; a quoted key stays part of its dotted key
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      size_t j = i + (multi ? 3 : 1);
      while (j < text.size()) {
        if (c == '"' && text[j] == '\\') {
          if (multi && line_ending_backslash(text, j)) {
            // TOML++ skips the whitespace after it: the first other character must be ASCII.
            size_t k = j + 1;
            while (k < text.size() && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n')) {
              if (text[k] == '\n') {
                ++line;
                line_start = k + 1;
              }
              ++k;
            }
            if (k < text.size() && static_cast<unsigned char>(text[k]) >= 0x80)
              return cat(where(k), ": a character outside ASCII right after a line-ending backslash (escape it, e.g. \\u00e9)");
            j = k;
            continue;
          }
          if (j + 1 < text.size() && text[j + 1] == '\n') {
            ++line;
            line_start = j + 2;
          }
          j += 2;
          continue;
        }
        if (text[j] == '\n') {
          if (!multi) break;  // an unterminated string: TOML++ says so
          ++line;
          line_start = j + 1;
        }
        if (text[j] == c && (!multi || text.compare(j, 3, std::string(3, c)) == 0)) {
          j += multi ? 2 : 0;
          break;
        }
        ++j;
      }
      i = j < text.size() ? j : text.size() - 1;
      if (j < text.size() && text[j] == '\n') --i;  // let the loop count the newline
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80)
      return cat(where(i), ": a character outside ASCII outside a string or comment (TOML allows them only there)");
    if (c == '.') {
      if (++key_parts > kMaxTomlKeyParts)
        return cat(where(i), ": a dotted key with more than ", kMaxTomlKeyParts, " parts (deck keys have two: section.key)");
      continue;
    }
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '+' || c == ' ' || c == '\t')
      continue;  // inside a bare key or a number
    key_parts = 1;
    if (c == '[' || c == '{') {
      if (++depth > kMaxTomlNesting)
        return cat(where(i), ": arrays or tables nested more than ", kMaxTomlNesting, " deep");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return "";
}

}  // namespace hone
