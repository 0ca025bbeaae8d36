// ZeroLayout: padding, buckets and this rank's chunks of the flat buffer.
#include "train/zero_layout.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {

ZeroLayout::ZeroLayout(int64_t num_params, int dp, int rank, std::vector<int64_t> bucket_starts)
    : n_(num_params), dp_(dp), rank_(rank) {
  HONE_CHECK(dp >= 1 && rank >= 0 && rank < dp, "rank ", rank, " of ", dp, " data-parallel ranks");
  HONE_CHECK(num_params >= 0, "negative parameter count ", num_params);
  padded_ = (n_ + dp - 1) / dp * dp;
  bucket_starts.push_back(0);
  std::sort(bucket_starts.begin(), bucket_starts.end());
  bucket_starts.erase(std::unique(bucket_starts.begin(), bucket_starts.end()), bucket_starts.end());
  for (int64_t s : bucket_starts)
    HONE_CHECK(s >= 0 && s % dp == 0 && (s < padded_ || (s == 0 && padded_ == 0)), "bucket start ", s,
               " must be a multiple of ", dp, " inside [0, ", padded_, ")");
  int64_t end = padded_, shard = 0;
  for (auto it = bucket_starts.rbegin(); it != bucket_starts.rend(); ++it) {
    if (*it >= end) continue;
    ZeroBucket b{*it, end - *it, shard};
    shard += b.size / dp;
    buckets_.push_back(b);
    end = *it;
  }
}

std::vector<ShardSegment> ZeroLayout::shard_segments(const std::vector<ParamSegment>& flat_segments) const {
  std::vector<ShardSegment> out;
  for (const ZeroBucket& b : buckets_) {
    const int64_t c0 = chunk_flat_offset(b), c1 = c0 + chunk_size(b);
    for (const ParamSegment& s : flat_segments) {
      const int64_t lo = std::max(c0, s.offset), hi = std::min(c1, s.offset + s.size);
      if (lo < hi) out.push_back({lo, b.shard_offset + (lo - c0), hi - lo, s.decay});
    }
  }
  return out;
}

std::vector<int64_t> zero_bucket_starts(const std::vector<int64_t>& ready_from, int64_t padded_size, int dp,
                                        int64_t bucket_elems) {
  std::vector<int64_t> starts;
  int64_t end = padded_size;
  for (int64_t r : ready_from) {
    const int64_t s = std::min(padded_size, (r + dp - 1) / dp * dp);  // round up: only final elements
    if (s > 0 && end - s >= bucket_elems) {
      starts.push_back(s);
      end = s;
    }
  }
  return starts;  // 0 is implied: the first bucket of the buffer takes the rest
}

}  // namespace hone
