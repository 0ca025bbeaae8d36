// The last step of the LM head's forward for one row, shared by the chunked path's statistics kernel
// (cuda/lm_head.cu) and the tile path's fold (cuda/lm_head_tile_stats.cu): from the row's folded statistics to
// LmHeadRowOutputs. Included by .cu files only.
#pragma once

#include <cmath>

#include "cuda/lm_head_kernels.h"

namespace hone::cuda::detail {

// A row without a target: 0 for logprob, lse and entropy (a slice's statistics: m = -inf, s = u = z_target = 0).
__device__ __forceinline__ void write_untargeted_row(const LmHeadRowOutputs& out, int r) {
  if (out.stats) {
    out.stats[r] = -INFINITY;
    out.stats[out.stats_stride + r] = 0.f;
    out.stats[2 * out.stats_stride + r] = 0.f;
    out.stats[3 * out.stats_stride + r] = 0.f;
  } else {
    out.logprob[r] = 0.f;
    out.lse[r] = 0.f;
    if (out.entropy) out.entropy[r] = 0.f;
  }
}

// A row with its max M, S = sum exp(z - M), U = sum exp(z - M) (z - M) and the target's logit zt: a slice's
// statistics as they are, or lse = M + log S, logprob = zt - lse, entropy = log S - U / S.
__device__ __forceinline__ void write_row(const LmHeadRowOutputs& out, int r, float M, double S, double U, float zt) {
  if (out.stats) {
    out.stats[r] = M;
    out.stats[out.stats_stride + r] = float(S);
    out.stats[2 * out.stats_stride + r] = float(U);
    out.stats[3 * out.stats_stride + r] = zt;
  } else {
    const double log_s = log(S);
    const float l = float(double(M) + log_s);
    out.lse[r] = l;
    out.logprob[r] = zt - l;
    if (out.entropy) out.entropy[r] = float(log_s - U / S);
  }
}

}  // namespace hone::cuda::detail
