// The paged KV cache's block allocator (behaviour in kv_block_manager.h).
#include "generation/kv_block_manager.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {

KvBlockManager::KvBlockManager(int num_blocks, int block_size)
    : num_blocks_(num_blocks), block_size_(block_size), refs_(size_t(std::max(num_blocks, 0)), 0) {
  HONE_CHECK(num_blocks > 0 && block_size > 0, "KV cache needs blocks, got ", num_blocks, " of ", block_size);
  free_.reserve(size_t(num_blocks));
  // Handed out from the back: block 0 first, so small runs use low block ids.
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

const std::vector<int32_t>& KvBlockManager::block_table(int64_t seq) const {
  auto it = tables_.find(seq);
  HONE_CHECK(it != tables_.end(), "no KV blocks for sequence ", seq);
  return it->second;
}

int KvBlockManager::take() {
  HONE_CHECK(!free_.empty(), "no free KV block");
  const int b = free_.back();
  free_.pop_back();
  refs_[size_t(b)] = 1;
  peak_used_ = std::max(peak_used_, num_used());
  return b;
}

bool KvBlockManager::allocate(int64_t seq, int64_t tokens) {
  HONE_CHECK(!has_sequence(seq), "sequence ", seq, " already has KV blocks");
  HONE_CHECK(tokens >= 0, "negative token count");
  const int n = blocks_for(tokens);
  if (n > num_free()) return false;
  std::vector<int32_t>& t = tables_[seq];
  t.reserve(size_t(n));
  for (int i = 0; i < n; ++i) t.push_back(take());
  return true;
}

bool KvBlockManager::fork(int64_t parent, int64_t child, int64_t prefix_tokens, int64_t tokens, bool share,
                          std::vector<std::pair<int32_t, int32_t>>& copies) {
  HONE_CHECK(!has_sequence(child), "sequence ", child, " already has KV blocks");
  HONE_CHECK(tokens >= prefix_tokens && prefix_tokens >= 0, "fork of ", prefix_tokens, " tokens into ", tokens);
  const std::vector<int32_t>& p = block_table(parent);
  HONE_CHECK(int64_t(p.size()) * block_size_ >= prefix_tokens, "parent holds fewer than ", prefix_tokens, " tokens");
  const int full = share ? int(prefix_tokens / block_size_) : 0;
  const int copied = blocks_for(prefix_tokens) - full;  // the partial last block, or every block without sharing
  const int n = std::max(blocks_for(tokens), full + copied);
  if (n - full > num_free()) return false;
  std::vector<int32_t> t;
  t.reserve(size_t(n));
  for (int i = 0; i < full; ++i) {
    t.push_back(p[size_t(i)]);
    ++refs_[size_t(p[size_t(i)])];
  }
  for (int i = full; i < n; ++i) {
    const int b = take();
    if (i < full + copied) copies.emplace_back(p[size_t(i)], b);
    t.push_back(b);
  }
  tables_[child] = std::move(t);
  return true;
}

int KvBlockManager::blocks_to_grow(int64_t seq, int64_t tokens) const {
  return std::max(0, blocks_for(tokens) - int(block_table(seq).size()));
}

bool KvBlockManager::grow(int64_t seq, int64_t tokens) {
  const int n = blocks_to_grow(seq, tokens);
  if (n > num_free()) return false;
  std::vector<int32_t>& t = tables_.at(seq);
  for (int i = 0; i < n; ++i) t.push_back(take());
  return true;
}

void KvBlockManager::free(int64_t seq) {
  auto it = tables_.find(seq);
  HONE_CHECK(it != tables_.end(), "free of sequence ", seq, " that has no KV blocks");
  for (int32_t b : it->second) {
    HONE_CHECK(refs_[size_t(b)] > 0, "KV block ", b, " freed more often than taken");
    if (--refs_[size_t(b)] == 0) free_.push_back(b);
  }
  tables_.erase(it);
}

int KvBlockManager::common_prefix_blocks(int64_t a, int64_t b) const {
  const std::vector<int32_t>& ta = block_table(a);
  const std::vector<int32_t>& tb = block_table(b);
  size_t n = 0;
  while (n < ta.size() && n < tb.size() && ta[n] == tb[n]) ++n;
  return int(n);
}

void KvBlockManager::check_consistency() const {
  std::vector<int32_t> count(size_t(num_blocks_), 0);
  for (const auto& [seq, t] : tables_)
    for (int32_t b : t) {
      HONE_CHECK(b >= 0 && b < num_blocks_, "sequence ", seq, " holds block ", b, " outside the pool");
      ++count[size_t(b)];
    }
  std::vector<char> is_free(size_t(num_blocks_), 0);
  for (int32_t b : free_) {
    HONE_CHECK(!is_free[size_t(b)], "block ", b, " is twice in the free list");
    is_free[size_t(b)] = 1;
  }
  for (int b = 0; b < num_blocks_; ++b) {
    HONE_CHECK(count[size_t(b)] == refs_[size_t(b)], "block ", b, " has ", refs_[size_t(b)], " references but ",
               count[size_t(b)], " table entries");
    HONE_CHECK(bool(is_free[size_t(b)]) == (refs_[size_t(b)] == 0), "block ", b, " free-list state disagrees with ",
               refs_[size_t(b)], " references");
  }
}

}  // namespace hone
