// The built-in character tokenizer ("chars") for synthetic tasks with random-init models: no files, a fixed
// vocabulary of 101 ids:
//   0 <|endoftext|> (EOS)   1 <|im_start|>   2 <|im_end|>   3 <|unk|>   4 '\t'   5 '\n'   6..100 ' '..'~'
// Special tokens written in the text are matched as such, so the chatml format works with it. Every other
// character (any non-ASCII code point, other control bytes) encodes to <|unk|>, which decodes to U+FFFD.
#pragma once

#include "tokenizer/tokenizer.h"

namespace hone::tok {

class CharTokenizer : public Tokenizer {
 public:
  static constexpr TokenId kEndOfText = 0, kImStart = 1, kImEnd = 2, kUnk = 3, kTab = 4, kNewline = 5, kFirstPrintable = 6;
  static constexpr TokenId kVocabSize = kFirstPrintable + 95;

  std::vector<TokenId> encode(std::string_view text, bool add_special = false) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const override;
  std::string token_bytes(TokenId id) const override { return id == kUnk ? "\xEF\xBF\xBD" : id_to_token(id); }
  TokenId token_to_id(std::string_view token) const override;
  std::string id_to_token(TokenId id) const override;
  TokenId vocab_size() const override { return kVocabSize; }
  TokenId bos_id() const override { return -1; }
  TokenId eos_id() const override { return kEndOfText; }
  TokenId pad_id() const override { return kEndOfText; }
  std::vector<TokenId> special_ids() const override { return {kEndOfText, kImStart, kImEnd, kUnk}; }
  bool is_special(TokenId id) const override { return id >= 0 && id < kTab; }
  std::string kind() const override { return "chars"; }
};

}  // namespace hone::tok
