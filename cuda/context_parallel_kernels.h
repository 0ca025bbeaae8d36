// The small device kernels of context parallelism (parallel/context_parallel.h, parallel/ring_attention.h):
// moving per-row values between the caller's rows and a rank's rows of a context-parallel split, and the
// accumulations of the ring's traveling K/V gradients (fp32 while they travel, bf16 in the layer). The CPU
// backend moves the rows with the reference ops of the same names (ops/cpu/rows.cpp) and accumulates with
// add_forward (ops/cpu/residual_add.cpp).
// Plain header: CUDA headers and ours only.
#pragma once

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// full[rows[p]] = all[p] for p < n where rows[p] >= 0 (the all-gathered rows of every rank back in the caller's
// order; padding rows dropped).
void scatter_rows_f32(float* full, const float* all, const int32_t* rows, int64_t n, const GpuContext& ctx);
// local[i] = rows[i] >= 0 ? full[rows[i]] : 0 for i < n (this rank's rows of the caller's values).
void take_rows_f32(float* local, const float* full, const int32_t* rows, int64_t n, const GpuContext& ctx);
// dst[i] += float(src[i]), i < n (the way back, fp32 into bf16, is accumulate_f32_into_bf16 of
// cuda/lm_head_kernels.h).
void accumulate_bf16_into_f32(float* dst, const bf16* src, int64_t n, const GpuContext& ctx);

}  // namespace hone::cuda
