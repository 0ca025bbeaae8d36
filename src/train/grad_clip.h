// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_ and Megatron-LM): when the L2 norm of all
// gradients exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6).
#pragma once

#include <cstdint>
#include <functional>

#include "comm/comm.h"

namespace hone {

// The factor clipping multiplies gradients by (1 when norm <= max_norm or max_norm <= 0, which disables clipping).
float clip_coefficient(double norm, double max_norm);

// Clips grad[n] in place; returns the norm before clipping. For sharded gradients, sum the shards'
// cpu::sum_squares over ranks, take sqrt, and apply clip_coefficient to each shard instead.
double clip_grad_norm(float* grad, int64_t n, double max_norm);

// The global gradient norm when the model itself is sharded over a group (tensor parallelism): each rank's sum of
// squares over its shard's flat buffer, with values that several ranks hold (replicated norm weights, replicated KV
// heads) weighted so that the group counts each once, summed over the group. Default: this rank holds the whole
// model (the plain sum of squares, no communication).
struct ShardedNorm {
  Comm* group = nullptr;
  // The sum over the group of a host value, when the group's Comm takes device buffers (NCCL): set by the
  // engine that owns the device scalar and the stream. Default: group->all_reduce_sum on the host value.
  std::function<double(double)> sum;
  // Weighted sum of squares of g = the shard's flat buffer at [flat_begin, flat_begin + n).
  std::function<double(const float* g, int64_t flat_begin, int64_t n)> weighted_sum_squares;

  double local(const float* g, int64_t flat_begin, int64_t n) const;
  double sum_over_group(double local_sum) const;  // collective over group (when set)
};

}  // namespace hone
