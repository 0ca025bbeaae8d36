// A Hugging Face byte-level BPE tokenizer read from tokenizer.json: added tokens, normalizer, pre-tokenizer,
// BPE model, post-processor and decoder, giving the same ids and text as the `tokenizers` library.
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
  // dir holds tokenizer.json and optionally tokenizer_config.json (bos_token, eos_token, pad_token).
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
  enum class Decoder { ByteLevel, ByteFallbackThenText, None };
  void load_normalizer(const nlohmann::json& spec);
  void load_post_processor(const nlohmann::json& spec);
  void load_decoder(const nlohmann::json& spec);
  void load_config(const std::string& path);
  void encode_ordinary(std::string_view text, std::vector<TokenId>& ids) const;  // no added tokens inside
  void encode_normalized(std::string_view text, std::vector<TokenId>& ids) const;
  void decode_chunk(std::span<const TokenId> ids, std::string& out) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::vector<NormalForm> normalizers_;               // applied in order
  AddedTokenMatcher raw_added_, normalized_added_;    // matched in raw / normalized text
  std::unordered_map<TokenId, AddedToken> added_by_id_;
  std::unordered_map<std::string, TokenId> added_by_content_;
  std::vector<TokenId> prefix_, suffix_;              // post-processor ids around a single sequence
  Decoder decoder_ = Decoder::ByteLevel;
  TokenId vocab_size_ = 0, bos_ = -1, eos_ = -1, pad_ = -1;
};

}  // namespace hone::tok
