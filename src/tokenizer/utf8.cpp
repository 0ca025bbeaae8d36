// UTF-8 repair, normalization (utf8proc) and Python-compatible whitespace stripping.
#include "tokenizer/utf8.h"

#include <algorithm>
#include <utf8proc.h>

#include <cstdlib>

#include "runtime/error.h"

namespace hone::tok {

namespace {

// Length of the valid sequence starting at s[i], or 0 with *bad set to the length of the maximal invalid subpart.
size_t valid_sequence(std::string_view s, size_t i, size_t* bad) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      *bad = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *bad = k;
      return 0;
    }
  }
  return len;
}

}  // namespace

bool utf8_valid(std::string_view s) {
  size_t i = 0, bad = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence(s, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  if (utf8_valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    size_t bad = 0;
    const size_t n = valid_sequence(s, i, &bad);
    if (n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
  uint32_t cp = b0 & (0x7F >> len);
  for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  // A sequence cut short at the end (invalid UTF-8 from a prompt) must not move past the text.
  i = std::min(i + static_cast<size_t>(len), s.size());
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

// Code points that NFC leaves alone whatever their neighbours are from the same set: NFC_QC=Yes, combining
// class 0, and never the second half of a canonical composition (checked over all of Unicode 14 with Python's
// unicodedata). Text made only of these needs no utf8proc call.
bool nfc_inert(uint32_t cp) {
  static constexpr uint32_t kRanges[][2] = {
      {0x0000, 0x02FF},   {0x0388, 0x03CE},   {0x0400, 0x0482},   {0x048A, 0x052F},   {0x05D0, 0x05EA},
      {0x0620, 0x064A},   {0x0905, 0x0939},   {0x0E01, 0x0E30},   {0x2002, 0x20CF},   {0x2190, 0x2328},
      {0x232B, 0x23FF},   {0x2500, 0x25FF},   {0x2600, 0x27BF},   {0x2E80, 0x2FDF},   {0x3000, 0x3029},
      {0x3030, 0x303F},   {0x3041, 0x3096},   {0x30A1, 0x30FA},   {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
      {0xFF01, 0xFFEE},   {0x1F1E6, 0x1F1FF}, {0x1F300, 0x1FAFF}};
  for (const auto& r : kRanges)
    if (cp >= r[0] && cp <= r[1]) return true;
  return false;
}

}  // namespace

namespace {

std::string utf8proc_normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options));
  HONE_CHECK(n >= 0, "utf8proc normalization failed: ", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  if (form != NormalForm::NFC) {
    for (char c : text)
      if (static_cast<unsigned char>(c) >= 0x80) return utf8proc_normalize(text, form);
    return std::string(text);
  }
  // NFC only changes stretches of non-inert characters together with the inert character just before them
  // (a starter they may compose with); inert characters further away are copied unchanged.
  std::string out;
  size_t copied = 0;     // text before this is already in out
  size_t prev = 0;       // start of the previous code point
  size_t i = 0;
  while (i < text.size()) {
    const size_t at = i;
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      prev = at;
      ++i;
      continue;
    }
    if (nfc_inert(utf8_next(text, i))) {
      prev = at;
      continue;
    }
    const size_t span_begin = at > 0 ? prev : 0;
    size_t span_end = i;
    while (span_end < text.size()) {
      size_t j = span_end;
      if (static_cast<unsigned char>(text[j]) < 0x80 || nfc_inert(utf8_next(text, j))) break;
      span_end = j;
    }
    out.append(text.substr(copied, span_begin - copied));
    out += utf8proc_normalize(text.substr(span_begin, span_end - span_begin), form);
    copied = span_end;
    i = span_end;
    prev = span_end;  // the next character is inert (or the end): it starts a fresh stretch
  }
  if (copied == 0) return std::string(text);
  out.append(text.substr(copied));
  return out;
}

bool unicode_white_space(uint32_t cp) {
  // Above ASCII the two definitions agree; below, Python also counts U+001C..U+001F.
  return cp < 0x80 ? ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20) : py_isspace(cp);
}

bool py_isspace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x1C && cp <= 0x20) return true;
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::string_view py_lstrip(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!py_isspace(utf8_next(s, j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view py_rstrip(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t j = start;
    if (!py_isspace(utf8_next(s, j))) break;
    end = start;
  }
  return s.substr(0, end);
}

std::string_view py_strip(std::string_view s) { return py_rstrip(py_lstrip(s)); }

}  // namespace hone::tok
