// Text from the user's files or arguments put into an error message: hone's errors are one line, so line breaks
// and other control characters in such text are written as escapes (\n, \t, \x01).
#pragma once

#include <string>
#include <string_view>

namespace hone {

std::string one_line(std::string_view text);

// one_line of at most the first max_bytes of the text (never cutting a UTF-8 character), with a note of the whole
// length when cut: a token name or a value of a megabyte is named, not echoed whole.
std::string one_line_excerpt(std::string_view text, size_t max_bytes = 120);

}  // namespace hone
