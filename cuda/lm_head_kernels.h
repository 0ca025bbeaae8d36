// The LM head's elementwise and per-row kernels (cuda/lm_head.cu), launched by cuda/lm_head.cpp between its GEMMs.
// Pointers to per-row arrays (targets, logprob, lse, ...) point at the first row of the current row block.
#pragma once

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// Running per-row statistics over vocabulary chunks (row block of R rows):
// m: running max of z, s = sum exp(z - m), u = sum exp(z - m) (z - m), zt: the target's z once seen.
struct LmHeadRowState {
  float* m;
  double* s;
  double* u;
  float* zt;
};

// Folds the chunk z[R, n] (row stride n; vocabulary rows [v0, v0 + n); already divided by the temperature) into
// the row state. first: the state is not yet initialized. last: also write lse, logprob and entropy (may be null).
// Rows with targets < 0 are skipped and get 0 on the last chunk; a target >= V is never seen and gives NaN.
void lm_head_chunk_stats(const float* z, int R, int n, int v0, bool first, bool last, const int32_t* targets,
                         LmHeadRowState st, float* logprob, float* entropy, float* lse, const GpuContext& ctx);

// dz[R, n] (bf16) = d(sum dlogprob*logprob + dentropy*entropy) / d(raw logit) for the chunk z[R, n] (z already
// divided by the temperature): (dlogprob ([j == target] - p) - dentropy p (log p + H)) / temperature; 0 for rows
// with targets < 0. dentropy and entropy may be null (together).
void lm_head_chunk_dlogits(bf16* dz, const float* z, int R, int n, int v0, const int32_t* targets,
                           const float* dlogprob, const float* dentropy, const float* lse, const float* entropy,
                           float temperature, const GpuContext& ctx);

// dst[i] = bf16(float(dst[i]) + src[i]): one rounding for an fp32-accumulated activation gradient.
void accumulate_f32_into_bf16(bf16* dst, const float* src, int64_t N, const GpuContext& ctx);

}  // namespace hone::cuda
