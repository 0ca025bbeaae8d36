// Internals of the packed causal attention on the GPU, shared by the cuDNN path (attention_cudnn.cpp), its helper
// kernels (attention_kernels.cu), the plain CUDA reference (attention_reference.cu) and the GPU tests.
// The public ops attention_forward / attention_backward (cuda/ops_cuda.h) choose a path:
//   HONE_ATTENTION=cudnn      cuDNN fused SDPA only (a configuration cuDNN refuses is an error)
//   HONE_ATTENTION=reference  the plain CUDA kernels only
//   unset / auto              cuDNN, falling back to the reference for a configuration cuDNN refuses
// Plain header: CUDA headers and ours only (the .cu files include it).
#pragma once

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// ---- the reference path (attention_reference.cu): fp32 math, one warp per query row or key row; D <= 256 --------
void attention_forward_reference(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                 const int32_t* cu_seqlens, int num_seqs, int T, int Hq, int Hkv, int D, float scale,
                                 const GpuContext& ctx);
// delta: scratch of Hq*T floats (rowsum(dout * out), computed here).
void attention_backward_reference(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                                  const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                                  int num_seqs, int T, int Hq, int Hkv, int D, float scale, float* delta,
                                  const GpuContext& ctx);
constexpr int kAttentionReferenceMaxD = 256;

// ---- the cuDNN path (attention_cudnn.cpp). False when cuDNN refuses this configuration (nothing was written). ----
bool attention_forward_cudnn(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                             const int32_t* cu_seqlens, int num_seqs, int max_seqlen, int T, int Hq, int Hkv, int D,
                             float scale, const GpuContext& ctx);
bool attention_backward_cudnn(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens, int num_seqs,
                              int max_seqlen, int T, int Hq, int Hkv, int D, float scale, const GpuContext& ctx);

// The blocks of ring attention (full attention of query segments against key segments, cuda/attention_block.cu):
// cuDNN (false when it refuses; nothing written) and the plain CUDA reference.
bool attention_block_forward_cudnn(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                   const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                                   const GpuContext& ctx);
bool attention_block_backward_cudnn(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                                    const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                    const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                                    const GpuContext& ctx);
void attention_block_forward_reference(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                       const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D,
                                       float scale, const GpuContext& ctx);
// delta: scratch of Hq*Tq floats.
void attention_block_backward_reference(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out,
                                        const float* lse, const bf16* q, const bf16* k, const bf16* v,
                                        const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D,
                                        float scale, float* delta, const GpuContext& ctx);

// How many cuDNN graphs this context has built (forward and backward, refused ones included): the plan cache test
// checks that a second call with the same bucketed shape builds none.
int64_t attention_cudnn_graphs_built(const GpuContext& ctx);

// The padded sizes a graph is built for: B = num_seqs rounded up to a multiple of 8, S = max_seqlen rounded up to
// a multiple of 64 (the padding mask makes the padded batches and rows inert). HONE_ATTENTION_BUCKETS=0 keeps the
// exact batch size.
int attention_bucket_batch(int num_seqs);
int attention_bucket_seqlen(int max_seqlen);

#ifdef __CUDACC__
// The sequence holding packed row t: the largest s with cu[s] <= t (then cu[s+1] > t; empty sequences are skipped).
__device__ inline int attention_sequence_of_row(const int32_t* cu, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (cu[mid] <= t) lo = mid; else hi = mid - 1;
  }
  return lo;
}
#endif

// ---- helper kernels (attention_kernels.cu) -------------------------------------------------------------------------
// From cu_seqlens[num_seqs+1]: seq_len[B], q_offset[B+1] = cu*Hq*D, kv_offset[B+1] = cu*Hkv*D (elements), for the
// padded batch B >= num_seqs (batches past num_seqs have length 0 and start at T).
void attention_ragged_offsets(int32_t* seq_len, int32_t* q_offset, int32_t* kv_offset, const int32_t* cu_seqlens,
                              int num_seqs, int B, int Hq, int Hkv, int D, const GpuContext& ctx);
// cuDNN's Stats[B, H, S, 1] (padded, packed BHSD) <-> our lse[H, T]. lse_to_stats writes 0 in padded entries.
void attention_stats_to_lse(float* lse, const float* stats, const int32_t* cu_seqlens, int num_seqs, int T, int H,
                            int S, const GpuContext& ctx);
void attention_lse_to_stats(float* stats, const float* lse, const int32_t* cu_seqlens, int num_seqs, int T, int B,
                            int H, int S, const GpuContext& ctx);
// The same for the segments of a block: seq_len_q[B], seq_len_kv[B], q_offset[B+1], kv_offset[B+1] (elements; padded
// batches have length 0 and start at the end), and the Stats <-> lse moves on the segments' query rows only.
void attention_segment_offsets(int32_t* seq_len_q, int32_t* seq_len_kv, int32_t* q_offset, int32_t* kv_offset,
                               const AttentionSegments& seg, int B, int Tq, int Tkv, int Hq, int Hkv, int D,
                               const GpuContext& ctx);
void attention_segment_stats_to_lse(float* lse, const float* stats, const AttentionSegments& seg, int Tq, int H,
                                    int S, const GpuContext& ctx);
void attention_segment_lse_to_stats(float* stats, const float* lse, const AttentionSegments& seg, int Tq, int B,
                                    int H, int S, const GpuContext& ctx);
// dst[i] = bf16(float(dst[i]) + float(src[i])): cuDNN writes gradients, the op contract accumulates them.
void attention_accumulate_bf16(bf16* dst, const bf16* src, int64_t n, const GpuContext& ctx);

}  // namespace hone::cuda
