// The byte-level alphabet of GPT-2 style BPE: every byte 0..255 is written as one printable Unicode character
// (printable Latin-1 bytes stand for themselves, the others map to U+0100 upward in byte order).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace hone::tok {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();
  // The UTF-8 text of the character that stands for byte b.
  const std::string& char_of(unsigned char b) const { return chars_[b]; }
  // Maps every character of text back to its byte; false when a character is not in the alphabet.
  bool to_bytes(std::string_view text, std::string* bytes) const;

 private:
  std::array<std::string, 256> chars_;
  std::array<int16_t, 324> byte_of_cp_;  // code point -> byte, -1 when not in the alphabet
};

const ByteLevelAlphabet& byte_level_alphabet();

}  // namespace hone::tok
