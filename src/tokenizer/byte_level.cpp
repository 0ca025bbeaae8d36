// The GPT-2 byte-level alphabet (bytes_to_unicode) and its inverse.
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace hone::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_cp_.fill(-1);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
    utf8_append(chars_[b], cp);
    byte_of_cp_[cp] = static_cast<int16_t>(b);
  }
}

bool ByteLevelAlphabet::to_bytes(std::string_view text, std::string* bytes) const {
  bytes->clear();
  size_t i = 0;
  while (i < text.size()) {
    const uint32_t cp = utf8_next(text, i);
    if (cp >= byte_of_cp_.size() || byte_of_cp_[cp] < 0) return false;
    bytes->push_back(static_cast<char>(byte_of_cp_[cp]));
  }
  return true;
}

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

}  // namespace hone::tok
