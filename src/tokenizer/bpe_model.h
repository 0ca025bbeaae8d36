// The BPE model of a Hugging Face tokenizer: vocabulary, merge ranks, and the merge loop that turns one
// pre-tokenized piece into token ids, exactly as `tokenizers` does. Two alphabets:
//   byte-level  (a ByteLevel pre-tokenizer: GPT-2, Llama 3, Qwen, SmolLM) a piece is raw bytes and starts as one
//               symbol per byte, the token of the byte's character in the GPT-2 byte alphabet;
//   characters  (SentencePiece-style files: Llama 2, Mistral) a piece starts as one symbol per Unicode character.
// A symbol missing from the vocabulary becomes, in this order: its UTF-8 bytes as <0xNN> tokens (byte_fallback,
// when all of them exist), unk_token (consecutive ones fused into one with fuse_unk), or nothing (dropped; its
// neighbours can still merge). Then the adjacent pair with the lowest merge rank (leftmost among equals) is merged
// until no pair has a rank. With ignore_merges (Llama 3) a piece that is itself a vocabulary entry becomes that one
// token. Results for short pieces are cached (piece -> ids), shared by all threads.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/flat_tables.h"

namespace hone::tok {

class BpeModel {
 public:
  // model: the "model" object of tokenizer.json (type BPE); byte_level: pieces are mapped through the GPT-2
  // byte alphabet (the file has a ByteLevel pre-tokenizer).
  BpeModel(const nlohmann::json& model, bool byte_level);

  // Appends the ids of one piece (raw bytes, or text for the character alphabet) to ids.
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;

  int32_t token_to_id(std::string_view token) const { return by_token_.find(token); }  // as written in the file
  int32_t bytes_to_id(std::string_view bytes) const { return by_bytes_.find(bytes); }  // by its raw bytes
  const std::string& token_of(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::string& bytes_of(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool has_id(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size() && present_[static_cast<size_t>(id)]; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }  // largest id + 1
  int32_t entry_count() const { return entry_count_; }                   // number of vocabulary entries
  bool byte_level() const { return byte_level_; }
  int32_t unk_id() const { return unk_; }  // -1 without unk_token

 private:
  using Merge = MergeTable::Merge;
  const Merge* find_merge(int32_t a, int32_t b) const { return merges_.find(a, b); }
  void merge_small(std::vector<int32_t>& syms) const;
  void merge_large(std::vector<int32_t>& syms) const;
  // The starting symbols of a piece (before merges), with byte fallback / unk / dropping.
  void initial_symbols(std::string_view piece, std::vector<int32_t>& syms) const;
  // One unit (a byte's alphabet character, or one character) missing from the vocabulary.
  void missing_symbol(std::string_view unit, std::vector<int32_t>& syms, bool& pending_unk) const;

  std::vector<std::string> tokens_;  // id -> token as in the file
  std::vector<std::string> bytes_;   // id -> raw bytes (byte-level decoded; the file text when not byte-level)
  std::vector<char> present_;
  StringIndex by_token_, by_bytes_;
  MergeTable merges_;
  int32_t byte_ids_[256];      // byte-level: byte -> token of its alphabet character, -1 when missing
  int32_t fallback_ids_[256];  // byte_fallback: byte -> <0xNN>, -1 when missing
  int32_t entry_count_ = 0;
  int32_t unk_ = -1;
  bool byte_level_ = true;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;

  static constexpr size_t kCacheMaxPiece = 64;   // longer pieces are not cached
  static constexpr size_t kShards = 16;  // each with 16384 entries at most
  struct Shard {
    std::mutex mu;
    PieceCache cache;
  };
  mutable Shard cache_[kShards];
};

}  // namespace hone::tok
