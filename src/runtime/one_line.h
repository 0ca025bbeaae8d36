// Text from the user's files or arguments put into an error message: hone's errors are one line, so line breaks
// and other control characters in such text are written as escapes (\n, \t, \x01).
#pragma once

#include <string>
#include <string_view>

namespace hone {

std::string one_line(std::string_view text);

}  // namespace hone
