// The tokenizer interface of hone: text to token ids and back.
//
// Two kinds behind one abstract class:
//   "hf"     BPE (byte-level, or SentencePiece-style with byte fallback) read from a Hugging Face tokenizer.json
//            (+ tokenizer_config.json / special_tokens_map.json for bos/eos/pad);
//            ids and decoded text identical to Hugging Face `tokenizers` (see doc/tokenizer.md)
//   "chars"  a fixed built-in character vocabulary for synthetic tasks with random-init models (no files)
//
// encode() takes raw bytes: invalid UTF-8 is first replaced with U+FFFD per maximal invalid subsequence (what
// Python's bytes.decode("utf-8", "replace") gives to Hugging Face). Special and added tokens written in the text
// (e.g. "<|im_start|>") are always matched as those tokens. add_special applies the post-processor (BOS for
// Llama 3). decode() never throws on ids: unknown ids are skipped, invalid UTF-8 becomes U+FFFD.
// All const methods are safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace hone {

using TokenId = int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<TokenId> encode(std::string_view text, bool add_special = false) const = 0;
  virtual std::string decode(std::span<const TokenId> ids, bool skip_special = false) const = 0;

  // The raw bytes one token contributes to decoded text ("" for an unknown id): for stop strings and incremental
  // detokenization. decode(ids) equals utf8_lossy of the concatenated token_bytes (skip_special=false), except that
  // a SentencePiece decoder (Strip, Metaspace) drops the leading space of the whole text, which token_bytes keeps.
  virtual std::string token_bytes(TokenId id) const = 0;

  virtual TokenId token_to_id(std::string_view token) const = 0;  // -1 when the token is not in the vocabulary
  virtual std::string id_to_token(TokenId id) const = 0;           // "" for an unknown id
  virtual TokenId vocab_size() const = 0;                          // largest id + 1, added tokens included

  virtual TokenId bos_id() const = 0;  // -1 when the tokenizer has none
  virtual TokenId eos_id() const = 0;  // end of a generation (Qwen3 <|im_end|>, Llama 3.1 <|eot_id|>)
  virtual TokenId pad_id() const = 0;  // -1 when none is declared
  virtual std::vector<TokenId> special_ids() const = 0;  // every token flagged special, ascending
  virtual bool is_special(TokenId id) const = 0;
  virtual std::string kind() const = 0;  // "hf" | "chars"

  // Many texts at once (OpenMP over texts); same result as encode() one by one.
  std::vector<std::vector<TokenId>> encode_batch(const std::vector<std::string>& texts, bool add_special = false) const;
};

// kind "hf": dir holds tokenizer.json (and optionally tokenizer_config.json). kind "chars": dir is ignored.
// Throws hone::UserError on an unknown kind, a missing file or an unsupported tokenizer.json feature.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& dir);

}  // namespace hone
