// Building packed batches and splitting sequence lists into batches of a token budget.
#include "model/packed_batch.h"

#include "runtime/error.h"

namespace hone {

void PackedBatch::append(const int32_t* ids, int n, const uint8_t* predict) {
  HONE_CHECK(n >= 1, "a packed sequence needs at least one token");
  tokens.insert(tokens.end(), ids, ids + n);
  for (int i = 0; i < n; ++i) {
    positions.push_back(i);
    const bool keep = i + 1 < n && (predict == nullptr || predict[i] != 0);
    targets.push_back(keep ? ids[i + 1] : -1);
  }
  cu_seqlens.push_back(cu_seqlens.back() + n);
}

void PackedBatch::clear() {
  tokens.clear();
  positions.clear();
  targets.clear();
  cu_seqlens.assign(1, 0);
}

PackedBatch PackedBatch::pack(const std::vector<std::vector<int32_t>>& seqs) {
  PackedBatch b;
  for (const auto& s : seqs) b.append(s);
  return b;
}

std::vector<std::pair<int, int>> split_by_tokens(const std::vector<int>& lengths, int64_t max_tokens) {
  HONE_CHECK(max_tokens >= 1, "max_tokens must be positive");
  std::vector<std::pair<int, int>> groups;
  int begin = 0;
  int64_t used = 0;
  for (int i = 0; i < int(lengths.size()); ++i) {
    if (i > begin && used + lengths[i] > max_tokens) {
      groups.emplace_back(begin, i);
      begin = i;
      used = 0;
    }
    used += lengths[i];
  }
  if (begin < int(lengths.size())) groups.emplace_back(begin, int(lengths.size()));
  return groups;
}

}  // namespace hone
