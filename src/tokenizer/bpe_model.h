// The BPE model of a byte-level Hugging Face tokenizer: vocabulary, merge ranks, and the merge loop that turns one
// pre-tokenized piece (raw bytes) into token ids. A piece starts as one symbol per byte; the adjacent pair with the
// lowest merge rank (leftmost among equals) is merged until no pair has a rank, exactly as `tokenizers` does.
// With ignore_merges (Llama 3) a piece that is itself a vocabulary entry becomes that one token.
// Results for short pieces are cached (piece -> ids), shared by all threads.
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
  explicit BpeModel(const nlohmann::json& model);  // the "model" object of tokenizer.json (type BPE)

  // Appends the ids of one piece (raw bytes) to ids.
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;

  int32_t token_to_id(std::string_view token) const { return by_token_.find(token); }  // as written in the file
  int32_t bytes_to_id(std::string_view bytes) const { return by_bytes_.find(bytes); }  // by its raw bytes
  const std::string& token_of(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  const std::string& bytes_of(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  bool has_id(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size() && present_[static_cast<size_t>(id)]; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }  // largest id + 1
  int32_t entry_count() const { return entry_count_; }                   // number of vocabulary entries

 private:
  using Merge = MergeTable::Merge;
  const Merge* find_merge(int32_t a, int32_t b) const { return merges_.find(a, b); }
  void merge_small(std::vector<int32_t>& syms) const;
  void merge_large(std::vector<int32_t>& syms) const;

  std::vector<std::string> tokens_;  // id -> token as in the file
  std::vector<std::string> bytes_;   // id -> raw bytes (byte-level decoded; the file text when not byte-level)
  std::vector<char> present_;
  StringIndex by_token_, by_bytes_;
  MergeTable merges_;
  int32_t byte_ids_[256];
  int32_t entry_count_ = 0;
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
