// The built-in character tokenizer.
#include "tokenizer/char_tokenizer.h"

#include <array>

#include "tokenizer/utf8.h"

namespace hone {

namespace tok {

namespace {

constexpr std::array<std::string_view, 4> kSpecialText = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|unk|>"};

}  // namespace

std::vector<TokenId> CharTokenizer::encode(std::string_view input, bool /*add_special: nothing to add*/) const {
  const std::string text = utf8_lossy(input);
  std::vector<TokenId> ids;
  ids.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '<') {
      bool matched = false;
      for (size_t k = 0; k < kSpecialText.size(); ++k) {
        if (std::string_view(text).substr(i, kSpecialText[k].size()) == kSpecialText[k]) {
          ids.push_back(static_cast<TokenId>(k));
          i += kSpecialText[k].size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      utf8_next(text, i);
      ids.push_back(kUnk);
      continue;
    }
    ++i;
    if (c == '\t') ids.push_back(kTab);
    else if (c == '\n') ids.push_back(kNewline);
    else if (c >= ' ' && c <= '~') ids.push_back(kFirstPrintable + (c - ' '));
    else ids.push_back(kUnk);
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string out;
  out.reserve(ids.size());
  for (TokenId id : ids) {
    if (id < 0 || id >= kVocabSize) continue;
    if (id == kUnk) {
      if (!skip_special) out += "\xEF\xBF\xBD";
    } else if (is_special(id)) {
      if (!skip_special) out += kSpecialText[static_cast<size_t>(id)];
    } else {
      out += id_to_token(id);
    }
  }
  return out;
}

TokenId CharTokenizer::token_to_id(std::string_view token) const {
  for (size_t k = 0; k < kSpecialText.size(); ++k)
    if (token == kSpecialText[k]) return static_cast<TokenId>(k);
  if (token.size() != 1) return -1;
  const auto ids = encode(token);
  return ids.size() == 1 && ids[0] != kUnk ? ids[0] : -1;
}

std::string CharTokenizer::id_to_token(TokenId id) const {
  if (id < 0 || id >= kVocabSize) return "";
  if (id < kTab) return std::string(kSpecialText[static_cast<size_t>(id)]);
  if (id == kTab) return "\t";
  if (id == kNewline) return "\n";
  return std::string(1, static_cast<char>(' ' + (id - kFirstPrintable)));
}

}  // namespace tok

}  // namespace hone
