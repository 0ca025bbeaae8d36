// The ZeRO-1 layout of the flat parameter buffer over the data-parallel ranks: the buffer is padded to a multiple
// of dp and cut into buckets (contiguous runs, each a multiple of dp long, listed in reduction order: from the end
// of the buffer, the order in which backward finishes gradients); rank r owns the r-th of the dp equal chunks of
// every bucket. Its shard buffer (fp32 master weights, Adam moments, reduced gradients) is its chunks one after
// the other, in bucket order. One bucket (the CPU engine's) makes the shard one contiguous run:
// [r * padded / dp, (r + 1) * padded / dp). Pure arithmetic: no communication, no device.
//
//   flat:   | bucket 1 (offset 0)       | bucket 0 (offset padded - size_0) |
//   rank 0: | chunk 0 of b1 |           | chunk 0 of b0 |                   |    shard 0 = [b0.c0, b1.c0]
#pragma once

#include <cstdint>
#include <vector>

#include "train/adamw.h"

namespace hone {

struct ZeroBucket {
  int64_t offset = 0;        // in the padded flat buffer
  int64_t size = 0;          // a multiple of dp
  int64_t shard_offset = 0;  // where this rank's chunk starts in its shard buffer
};

class ZeroLayout {
 public:
  // bucket_starts: offsets (multiples of dp, ascending or not, 0 implied) where buckets begin; empty: one bucket.
  ZeroLayout(int64_t num_params, int dp, int rank, std::vector<int64_t> bucket_starts = {});

  int64_t num_params() const { return n_; }
  int64_t padded_size() const { return padded_; }
  int64_t shard_size() const { return padded_ / dp_; }
  int dp() const { return dp_; }
  int rank() const { return rank_; }
  const std::vector<ZeroBucket>& buckets() const { return buckets_; }  // reduction order (descending offsets)
  int64_t chunk_size(const ZeroBucket& b) const { return b.size / dp_; }
  // Where this rank's chunk of b starts in the flat buffer.
  int64_t chunk_flat_offset(const ZeroBucket& b) const { return b.offset + int64_t(rank_) * chunk_size(b); }
  // The global weight-decay segments cut to this rank's chunks (padding belongs to no segment): shard[shard_offset
  // + i] is flat[flat_offset + i].
  std::vector<ShardSegment> shard_segments(const std::vector<ParamSegment>& flat_segments) const;

 private:
  int64_t n_, padded_;
  int dp_, rank_;
  std::vector<ZeroBucket> buckets_;
};

// Bucket starts for a backward that finishes gradients in stages: after stage k every element at or above
// ready_from[k] is final (ready_from descending, ending with 0). Buckets start at stage boundaries rounded up to a
// multiple of dp (a bucket never holds an unfinished element) and hold at least bucket_elems elements where the
// stages allow it (the last bucket, at offset 0, takes what is left).
std::vector<int64_t> zero_bucket_starts(const std::vector<int64_t>& ready_from, int64_t padded_size, int dp,
                                        int64_t bucket_elems);

}  // namespace hone
