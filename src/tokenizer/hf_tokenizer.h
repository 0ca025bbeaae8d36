// A Hugging Face BPE tokenizer read from tokenizer.json: added tokens, normalizer, pre-tokenizer, BPE model
// (byte-level, or characters with byte fallback), post-processor and decoder, giving the same ids and text as
// the `tokenizers` library. Normalizers: NFC, NFD, NFKC, NFKD, Prepend, Replace (String), Sequence. Decoders:
// ByteLevel, ByteFallback, Fuse, Replace (String), Strip, Metaspace, Sequence, applied in order to the token
// texts as `tokenizers` does. Anything else is refused with one line naming it.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace hone::tok {

class HfTokenizer : public Tokenizer {
 public:
  // dir holds tokenizer.json and optionally tokenizer_config.json / special_tokens_map.json (bos_token,
  // eos_token, pad_token: strings, AddedToken objects or null).
  explicit HfTokenizer(const std::string& dir);

  std::vector<TokenId> encode(std::string_view text, bool add_special = false) const override;
  std::string decode(std::span<const TokenId> ids, bool skip_special = false) const override;
  std::string token_bytes(TokenId id) const override;
  TokenId token_to_id(std::string_view token) const override;
  std::string id_to_token(TokenId id) const override;
  TokenId vocab_size() const override { return vocab_size_; }
  TokenId bos_id() const override { return bos_; }
  TokenId eos_id() const override { return eos_; }
  TokenId pad_id() const override { return pad_; }
  std::vector<TokenId> special_ids() const override;
  bool is_special(TokenId id) const override;
  std::string kind() const override { return "hf"; }

 private:
  struct Normalizer {
    enum class Kind { Form, Prepend, Replace } kind = Kind::Form;
    NormalForm form = NormalForm::NFC;
    std::string a, b;  // Prepend: a; Replace: a -> b
  };
  struct Decoder {
    enum class Kind { ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace } kind = Kind::ByteLevel;
    std::string a, b;       // Replace: a -> b; Strip: a the character; Metaspace: a the replacement
    size_t start = 0, stop = 0;  // Strip
    bool prepend = true;    // Metaspace: prepend_scheme is not "never"
  };
  void load_normalizer(const nlohmann::json& spec);
  void load_post_processor(const nlohmann::json& spec);
  void load_decoder(const nlohmann::json& spec);
  void load_config(const std::string& dir);
  void encode_ordinary(std::string_view text, bool at_start, std::vector<TokenId>& ids) const;  // no added tokens
  void encode_normalized(std::string_view text, bool at_start, std::vector<TokenId>& ids) const;
  std::string normalize_text(std::string_view text) const;
  std::string decode_pipeline(std::vector<std::string> tokens) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  AddedTokenMatcher raw_added_, normalized_added_;    // matched in raw / normalized text
  std::unordered_map<TokenId, AddedToken> added_by_id_;
  std::unordered_map<std::string, TokenId> added_by_content_;
  std::vector<TokenId> prefix_, suffix_;              // post-processor ids around a single sequence
  std::vector<Normalizer> normalize_steps_;
  std::vector<Decoder> decoders_;
  bool has_decoder_ = true;       // false: no decoder, token texts joined with spaces
  bool byte_level_decode_ = true;  // the decoder is ByteLevel alone (the fast path)
  bool byte_fallback_decode_ = false;
  TokenId vocab_size_ = 0, bos_ = -1, eos_ = -1, pad_ = -1;
};

}  // namespace hone::tok
