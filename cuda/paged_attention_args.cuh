// What the paged decode attention's kernels share (cuda/paged_attention.cu: the CUDA-core paths, the combine and
// the plan; cuda/paged_attention_mma8.cu: the plain path at GQA 8 on the tensor cores): their arguments, the CTA
// shape, where a row's own tokens start, and the tensor-core path's launch. Internal to those two files.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/ops_cuda.h"

namespace hone::cuda::paged {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

struct Args {
  const bf16* q;
  const bf16* k_pool;
  const bf16* v_pool;
  const int32_t* block_tables;
  const int32_t* seq_lens;
  int B, max_blocks, block_shift, Hq, Hkv, R;
  float qscale;  // softmax scale * log2 e
  // plain path
  int nsplit, chunk, qchunks;
  // groups
  int num_groups;
  const int32_t* group_offsets;
  const int32_t* prefix_lens;
  int nsplit_p, chunk_p, qy;
  // outputs: bf16 directly, or partials
  bf16* out;
  float* plain_o;
  float* plain_lse;
  float* pre_o;
  float* pre_lse;
};

// The first token of row b the plain path attends: after its group's shared prefix for a row of a group, else 0.
__device__ __forceinline__ int row_start(const Args& a, int b) {
  if (a.num_groups == 0 || b < a.group_offsets[0] || b >= a.group_offsets[a.num_groups]) return 0;
  int lo = 0, hi = a.num_groups - 1;  // the last group g with group_offsets[g] <= b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.group_offsets[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  return a.prefix_lens[lo];
}

// The last step of a CTA, after a __syncthreads(): merges its warps' softmax states of nq vectors (s_m, s_l
// [kWarps][Q] and s_acc [kWarps][Q][D] in shared memory; base-2 maxima) and writes each vector's output: bf16 at
// a.out (direct) or the fp32 partial and its lse (log2 units; -inf with a zero output when no warp saw a token).
template <int D, int Q>
__device__ __forceinline__ void store_merged(const Args& a, const float (*s_acc)[Q][D], const float (*s_m)[Q],
                                             const float (*s_l)[Q], int nq, const int64_t* dst, bool direct,
                                             float* part_o, float* part_lse) {
  for (int t = threadIdx.x; t < nq * D; t += kThreads) {
    const int r = t / D, d = t % D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, s_m[w][r]);
    float o = 0.f, lse = -INFINITY;
    if (M != -INFINITY) {
      float den = 0.f, num = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float e = exp2f(s_m[w][r] - M);
        den += s_l[w][r] * e;
        num += s_acc[w][r][d] * e;
      }
      o = num / den;
      lse = M + log2f(den);
    }
    if (direct) {
      a.out[dst[r] * D + d] = __float2bfloat16(o);
    } else {
      part_o[dst[r] * D + d] = o;
      if (d == 0) part_lse[dst[r]] = lse;
    }
  }
}

// The plain path at GQA 8 and head dim 128 on the tensor cores over `ctas` CTAs ((b * Hkv + h) * nsplit + s),
// writing the bf16 output (direct) or the partials.
void launch_plain_mma8(const Args& a, unsigned ctas, bool direct, cudaStream_t stream);

}  // namespace hone::cuda::paged
