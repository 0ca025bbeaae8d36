// Escaping control characters for one-line messages (see one_line.h).
#include "runtime/one_line.h"

#include <cstdio>

namespace hone {

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string one_line_excerpt(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return one_line(text);
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return one_line(text.substr(0, n)) + "... (" + std::to_string(text.size()) + " bytes in all)";
}

}  // namespace hone
