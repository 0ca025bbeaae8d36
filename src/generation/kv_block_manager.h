// The bookkeeping of the paged KV cache: a fixed pool of blocks (block_size tokens each), a free list, a reference
// count per block and a block table per sequence. Pure host code: the device pools (cuda/generation_ops.h) hold
// the data, this class only decides which block holds which token.
//
// Prefix sharing: the G samples of a GRPO group have the same prompt. One member (the leader) owns blocks for its
// prompt; fork() gives another member the leader's FULL prompt blocks (reference counted, never written again:
// every new token lands after the prompt) and a private block for the partial last one, whose contents the caller
// copies from the leader's (copy-on-write, done once at fork time since the next token writes into it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hone {

class KvBlockManager {
 public:
  KvBlockManager(int num_blocks, int block_size);

  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int num_free() const { return int(free_.size()); }
  int num_used() const { return num_blocks_ - num_free(); }
  int peak_used() const { return peak_used_; }
  int ref_count(int block) const { return refs_[size_t(block)]; }
  int blocks_for(int64_t tokens) const { return int((tokens + block_size_ - 1) / block_size_); }

  bool has_sequence(int64_t seq) const { return tables_.count(seq) != 0; }
  const std::vector<int32_t>& block_table(int64_t seq) const;
  // Tokens the sequence's blocks can hold.
  int64_t capacity(int64_t seq) const { return int64_t(block_table(seq).size()) * block_size_; }

  // A new sequence with private blocks for `tokens` tokens. False (and nothing changes) when too few are free.
  bool allocate(int64_t seq, int64_t tokens);
  // A new sequence `child` sharing the full blocks of the first `prefix_tokens` tokens of `parent`, with private
  // blocks for the rest up to `tokens` tokens (>= prefix_tokens). With a partial last prefix block, its (src, dst)
  // pair is appended to `copies`: the caller copies the block's contents before anything writes to either.
  // share = false: every prefix block is private and copied (the same contents, no sharing).
  bool fork(int64_t parent, int64_t child, int64_t prefix_tokens, int64_t tokens, bool share,
            std::vector<std::pair<int32_t, int32_t>>& copies);
  // Blocks `seq` needs beyond its table to hold `tokens` tokens.
  int blocks_to_grow(int64_t seq, int64_t tokens) const;
  // Grows `seq` to hold `tokens` tokens. False (nothing changes) when too few blocks are free.
  bool grow(int64_t seq, int64_t tokens);
  // Drops the sequence; each of its blocks loses one reference and returns to the free list at zero.
  void free(int64_t seq);

  // Number of leading blocks the two sequences' tables have in common (same block ids).
  int common_prefix_blocks(int64_t a, int64_t b) const;
  // Consistency check for tests: every block's reference count equals its occurrences in the tables, the free
  // list holds exactly the blocks with no reference. Throws hone::Error when not.
  void check_consistency() const;

 private:
  int take();  // a free block with one reference

  int num_blocks_ = 0, block_size_ = 0;
  std::vector<int32_t> free_;
  std::vector<int32_t> refs_;
  std::unordered_map<int64_t, std::vector<int32_t>> tables_;
  int peak_used_ = 0;
};

}  // namespace hone
