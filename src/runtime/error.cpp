// Out-of-line part of the check macros (keeps the throw path out of every call site).
#include "runtime/error.h"

namespace hone::detail {

std::string nul_safe(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  out.reserve(message.size() + 8);
  for (const char ch : message) {
    if (ch == '\0') out += "\\x00";
    else out += ch;
  }
  return out;
}

void check_failed(const char* kind, const char* expr, const char* file, int line, const std::string& detail) {
  std::string msg = cat(kind, " failed: ", expr, " at ", file, ":", line);
  if (!detail.empty()) msg += cat(": ", detail);
  throw Error(msg);
}

void call_failed(const char* macro, const char* expr, const std::string& reason, const char* file, int line) {
  throw Error(cat(macro, "(", expr, ") failed: ", reason, " at ", file, ":", line));
}

}  // namespace hone::detail
