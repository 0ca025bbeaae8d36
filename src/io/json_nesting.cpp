// The nesting depth of a JSON text (see json_nesting.h).
#include "io/json_nesting.h"

#include "runtime/error.h"

namespace hone {

int json_nesting(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > kMaxJsonNesting) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string json_nesting_error(std::string_view text) {
  if (json_nesting(text) <= kMaxJsonNesting) return "";
  return cat("JSON nested deeper than ", kMaxJsonNesting, " levels of [ and { (hone's limit)");
}

void check_json_nesting(std::string_view text, const std::string& what) {
  const std::string e = json_nesting_error(text);
  HONE_USER_CHECK(e.empty(), what, ": ", e);
}

}  // namespace hone
