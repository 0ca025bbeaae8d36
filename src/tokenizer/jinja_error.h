// The one error a chat template raises, parsing or rendering: a message and the template line it concerns.
// Callers turn it into a one-line user error naming the file the template came from.
#pragma once

#include <stdexcept>
#include <string>

namespace hone::jinja {

class TemplateError : public std::runtime_error {
 public:
  TemplateError(int line, const std::string& message)
      : std::runtime_error("line " + std::to_string(line) + ": " + message), line_(line), message_(message) {}
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  int line_;
  std::string message_;
};

}  // namespace hone::jinja
