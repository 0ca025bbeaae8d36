// What the paged decode attention's kernels share (cuda/paged_attention.cu: the CUDA-core paths, the combine and
// the plan; cuda/paged_attention_mma8.cu: the plain path at GQA 8 on the tensor cores): their arguments, the CTA
// shape, where a row's own tokens start, and the tensor-core path's launch. Internal to those two files.
#pragma once

#include <cstdint>

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

// The plain path at GQA 8 and head dim 128 on the tensor cores over `ctas` CTAs ((b * Hkv + h) * nsplit + s),
// writing the bf16 output (direct) or the partials.
void launch_plain_mma8(const Args& a, unsigned ctas, bool direct, cudaStream_t stream);

}  // namespace hone::cuda::paged
