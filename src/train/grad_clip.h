// Global-norm gradient clipping (as torch.nn.utils.clip_grad_norm_ and Megatron-LM): when the L2 norm of all
// gradients exceeds max_norm, every gradient is scaled by max_norm / (norm + 1e-6).
#pragma once

#include <cstdint>

namespace hone {

// The factor clipping multiplies gradients by (1 when norm <= max_norm or max_norm <= 0, which disables clipping).
float clip_coefficient(double norm, double max_norm);

// Clips grad[n] in place; returns the norm before clipping. For sharded gradients, sum the shards'
// cpu::sum_squares over ranks, take sqrt, and apply clip_coefficient to each shard instead.
double clip_grad_norm(float* grad, int64_t n, double max_norm);

}  // namespace hone
