// UTF-8 helpers shared by the tokenizers and chat formats: lossy repair of invalid byte sequences (the way Rust's
// String::from_utf8_lossy and Python's errors="replace" do it), Unicode normalization forms, and the whitespace
// stripping of Python's str.strip() that chat templates use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hone::tok {

// Replaces every maximal invalid subsequence (Unicode 3.9 "maximal subpart" practice) with U+FFFD.
// Valid input comes back unchanged.
std::string utf8_lossy(std::string_view bytes);
bool utf8_valid(std::string_view bytes);

// Decodes the code point starting at s[i] (valid UTF-8 assumed: invalid bytes give some code point) and advances
// i, never past s.size().
uint32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, uint32_t cp);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Normalizes valid UTF-8 text; pure ASCII is returned unchanged without calling utf8proc.
std::string normalize(std::string_view text, NormalForm form);

// The Unicode White_Space property (Rust's char::is_whitespace, Oniguruma's \s).
bool unicode_white_space(uint32_t cp);

// Python's str.isspace() for one code point, and str.strip() / lstrip() / rstrip() with no argument.
bool py_isspace(uint32_t cp);
std::string_view py_strip(std::string_view s);
std::string_view py_lstrip(std::string_view s);
std::string_view py_rstrip(std::string_view s);

}  // namespace hone::tok
