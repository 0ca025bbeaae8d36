// The LM head's elementwise and per-row kernels (cuda/lm_head.cu), launched by cuda/lm_head.cpp between its GEMMs.
// Pointers to per-row arrays (targets, logprob, lse, ...) point at the first row of the current row block.
// The same kernels serve the whole vocabulary and a vocabulary slice (tensor parallelism): col0, the global
// vocabulary id of a chunk's first column (v0 + vocab_begin), is all that locates targets; the whole op passes v0.
#pragma once

#include <cuda.h>
#include <cuda_fp16.h>

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

// Where the last chunk writes each row's result. stats null: the whole vocabulary's lse, logprob and entropy (may
// be null). stats non-null (a vocabulary slice): the row's m, s, u and target logit at stats[k * stats_stride]
// for k = 0..3 (cpu::lm_head_vocab_slice_forward's [4, T] layout; the stride is T, not the row block).
struct LmHeadRowOutputs {
  float* logprob;
  float* entropy;
  float* lse;
  float* stats;
  int64_t stats_stride;
};

// Where a chunk's logits are kept for the backward (the saved variant, lm_head_saved_forward): z at row r, column j
// of the chunk is z[r * ld + j] (fp16, relative to the row's running max M after this chunk), and M is max[r].
// z null: nothing kept. fp16, not bf16: the kept values are <= 0 and rarely below -100, well inside fp16's range,
// and its 11 significant bits give the backward's p 8x less error than bf16's 8.
struct LmHeadSavedChunk {
  __half* z;
  int64_t ld;
  float* max;
};

// Folds the chunk z[R, n] (row stride n; global vocabulary ids [col0, col0 + n); already divided by the
// temperature) into the row state. first: the state is not yet initialized. last: also write the outputs.
// Rows with targets < 0 are skipped and get 0 (stats: m = -inf, 0) on the last chunk. A target never seen gives a
// NaN logprob for the whole vocabulary (an id >= V) and a target logit of 0 for a slice (another slice's id).
// With saved.z, also keeps the chunk (rows without a target are left as they were).
void lm_head_chunk_stats(const float* z, int R, int n, int col0, bool first, bool last, const int32_t* targets,
                         LmHeadRowState st, LmHeadRowOutputs out, LmHeadSavedChunk saved, const GpuContext& ctx);

// The statistics of a slice that gives no logits (padding only): stats[4, T] = (-inf, 0, 0, 0) per row.
void lm_head_stats_empty(float* stats, int T, const GpuContext& ctx);

// dz[R, n] (bf16) = d(sum dlogprob*logprob + dentropy*entropy) / d(raw logit) for the chunk z[R, n] (z already
// divided by the temperature; global vocabulary ids [col0, col0 + n)): (dlogprob ([j == target] - p) - dentropy p
// (log p + H)) / temperature; 0 for rows with targets < 0. dentropy and entropy may be null (together).
void lm_head_chunk_dlogits(bf16* dz, const float* z, int R, int n, int col0, const int32_t* targets,
                           const float* dlogprob, const float* dentropy, const float* lse, const float* entropy,
                           float temperature, const GpuContext& ctx);

// The same dlogits from kept logits, in place over the row block's [R, V] of z (row stride ld, a multiple of 8):
// the logit of column j is z[r * ld + j] + max[(j / chunk_v) * max_stride + r]; each fp16 value is replaced by
// its bf16 dlogit (the same two bytes: z then holds dz[R, V] for the GEMMs); rows with targets < 0 get 0.
void lm_head_saved_dlogits(__half* z, int64_t ld, const float* max, int64_t max_stride, int R, int V, int chunk_v,
                           const int32_t* targets, const float* dlogprob, const float* dentropy, const float* lse,
                           const float* entropy, float temperature, const GpuContext& ctx);

// ---- statistics in the logits GEMM's epilogue (Hopper, cuda/lm_head_tile_stats.cu) ---------------------------
// Whether this GPU runs the tile kernel: an sm_90a device (H100, H200) and a build that holds its sm_90a machine
// code. Elsewhere the LM head takes its chunked path.
bool lm_head_tile_stats_runs(const GpuContext& ctx);

// Vocabulary columns of one tile (the statistics are per row and tile of this many columns), and its rows.
constexpr int kLmHeadTileV = 256;
constexpr int kLmHeadTileRows = 128;

// Per-tile statistics of rows [0, R): m[t * m_stride + r] the max of z over tile t, s and u (at su_stride) the
// tile's sum exp(z - m) and sum exp(z - m) (z - m); zt[r] the target's z, written only by the tile that holds it.
struct LmHeadTileStats {
  float* m;
  int64_t m_stride;
  float* s;
  float* u;
  int64_t su_stride;
  float* zt;
};

// z = h W^T / temperature for h [R, C] and W [V, C] (tensor maps of tensor_map_bf16_2d with boxes of 64 columns by
// kLmHeadTileRows rows for h and kLmHeadTileV rows for W; C a multiple of 64), never written: its per-tile statistics go to `out`
// (global vocabulary ids col0 + [0, V) locate the targets). kept non-null (the saved variant): z - m in fp16 at
// kept[r * kept_ld + j] for j < V (kept_ld a multiple of 8), with m the tile's max, so that out.m is the
// per-chunk max of lm_head_saved_dlogits with chunk_v = kLmHeadTileV.
void lm_head_tile_stats(const CUtensorMap& h_map, const CUtensorMap& w_map, int R, int V, int C, int col0,
                        float temperature, const int32_t* targets, LmHeadTileStats out, __half* kept, int64_t kept_ld,
                        const GpuContext& ctx);

// Folds each row's tiles (ceil(V / kLmHeadTileV) of them) into `out` as the last chunk of lm_head_chunk_stats does:
// lse, logprob and entropy, or a slice's statistics; rows with targets < 0 get 0 (stats: -inf, 0, 0, 0).
void lm_head_tile_combine(LmHeadTileStats in, int R, int V, int col0, const int32_t* targets, LmHeadRowOutputs out,
                          const GpuContext& ctx);

// dst[i] = bf16(float(dst[i]) + src[i]): one rounding for an fp32-accumulated activation gradient.
void accumulate_f32_into_bf16(bf16* dst, const float* src, int64_t N, const GpuContext& ctx);

}  // namespace hone::cuda
