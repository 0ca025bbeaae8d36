// PackedBatch: several token sequences packed into one row of T tokens, the unit the transformer runs on.
// Positions restart at 0 in each sequence, attention stays inside a sequence (cu_seqlens), and targets[t] is the
// next token of the same sequence (-1 at a sequence's last token and wherever the caller masks the prediction).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace hone {

struct PackedBatch {
  std::vector<int32_t> tokens;      // [T]
  std::vector<int32_t> positions;   // [T], 0 at the start of each sequence
  std::vector<int32_t> targets;     // [T], tokens[t+1] of the same sequence or -1
  std::vector<int32_t> cu_seqlens;  // [S+1], cu_seqlens[0] == 0, cu_seqlens[S] == T

  PackedBatch() : cu_seqlens{0} {}

  int num_tokens() const { return int(tokens.size()); }
  int num_seqs() const { return int(cu_seqlens.size()) - 1; }
  // Rows [begin, end) of sequence s.
  int seq_begin(int s) const { return cu_seqlens[s]; }
  int seq_end(int s) const { return cu_seqlens[s + 1]; }

  // Appends one sequence of n >= 1 tokens. predict[i] (i < n-1), when given, says whether the prediction of
  // ids[i+1] from position i is kept (targets[i] = ids[i+1]) or masked (targets[i] = -1).
  void append(const int32_t* ids, int n, const uint8_t* predict = nullptr);
  void append(const std::vector<int32_t>& ids) { append(ids.data(), int(ids.size())); }
  void clear();

  static PackedBatch pack(const std::vector<std::vector<int32_t>>& seqs);
};

// Splits sequences (by their lengths, in order) into consecutive groups of at most max_tokens tokens each:
// returns [begin, end) index ranges. A sequence longer than max_tokens forms a group of its own.
std::vector<std::pair<int, int>> split_by_tokens(const std::vector<int>& lengths, int64_t max_tokens);

}  // namespace hone
