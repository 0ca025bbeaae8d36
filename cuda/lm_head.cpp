// The LM head fused with log-softmax gather and entropy on the GPU, in vocabulary chunks: no [T, V] logits buffer.
// Rows are taken R at a time (a row block) and the vocabulary chunk_v rows of W at a time; each logits chunk
// [R, n] is formed by a cuBLASLt GEMM in fp32 with alpha = 1/temperature, then a kernel folds it into per-row
// online statistics (cuda/lm_head.cu). Backward recomputes every chunk, turns it into dlogits (bf16: the operand
// type of the bf16 tensor-core GEMMs that follow) and accumulates dh (fp32 per row block, rounded into the bf16 dh
// once) and dW (fp32, directly). Same semantics as hone::cpu::lm_head_logprob_forward/backward.
// The saved variant (lm_head_saved_forward/backward, training without recompute) keeps each chunk in fp16 as the
// forward's statistics kernel reads it, so that the backward skips the recompute GEMM and the fp32 round trip of
// every chunk, and runs its two GEMMs over the whole vocabulary at once.
// On an H100 or H200 (sm_90a), where both operands can be tensor-mapped (C a multiple of 64, 16-byte aligned), the
// forwards take the tile path instead (cuda/lm_head_tile_stats.cu): hone's own Hopper GEMM computes the statistics
// of each 128 x 256 tile of logits in its epilogue, so no logit is ever written in fp32, and one kernel folds a
// row's tiles; the saved variant keeps its fp16 logits relative to each tile's max, which its backward reads as
// chunks of 256. Other GPUs (A100, L40S, B200) run the chunked path.
// The vocabulary-parallel slice ops (as hone::cpu::lm_head_vocab_slice_forward/backward) run the same drivers over
// the slice's vocab_valid rows of W with global ids from vocab_begin; the slice forward writes per-row statistics
// in place of the finished values.
//
// Work buffers live in the context's GEMM scratch (cuda/gemm.h), at most kScratchBudget bytes: R is chosen so that
// the row block's buffers fit. Unlike the CPU twin, rows without a target are not gathered out: they go through the
// GEMMs (the GPU never learns the count without a synchronization) and are masked by the kernels.
#include <algorithm>

#include "cuda/gemm.h"
#include "cuda/lm_head_kernels.h"
#include "cuda/ops_cuda.h"
#include "cuda/tensor_map.h"
#include "runtime/error.h"

namespace hone::cuda {

namespace {

constexpr size_t kScratchBudget = size_t(128) << 20;
constexpr int kMaxRowBlock = 32768;

size_t round_up(size_t x) { return (x + 255) / 256 * 256; }

void check_args(int T, int C, int V, float temperature, int chunk_v) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  HONE_CHECK(chunk_v > 0, "chunk_v must be positive, got ", chunk_v);
}

// Rows per block so that R * bytes_per_row fits the budget (at least 1, at most T).
int row_block(int T, size_t bytes_per_row) {
  const size_t r = kScratchBudget / bytes_per_row;
  return int(std::max<size_t>(1, std::min<size_t>(r, size_t(std::min(T, kMaxRowBlock)))));
}

// z[R, n] = h[R, C] W[v0 : v0 + n, C]^T / temperature, fp32, row stride n.
void logits_chunk(float* z, const bf16* h, const bf16* w, int R, int C, int v0, int n, float temperature,
                  const GpuContext& ctx) {
  gemm(false, /*trans_b=*/true, R, n, C, 1.f / temperature, h, C, w + int64_t(v0) * C, C, 0.f, z, GemmOut::f32, n,
       nullptr, ctx);
}

// The outputs of the row block starting at row r0 (null pointers stay null).
LmHeadRowOutputs at_row(LmHeadRowOutputs o, int r0) {
  if (o.stats) {
    o.stats += r0;  // the stride stays T
  } else {
    o.logprob += r0;
    o.lse += r0;
    if (o.entropy) o.entropy += r0;
  }
  return o;
}

// The saved variant's buffer: fp16 logits [T, ld] (ld = V rounded up to 8, for 16-byte rows), then each chunk's
// running max [ceil(V / chunk_v), T] (fp32).
struct KeptLogits {
  __half* z;
  int64_t ld;
  float* max;
};

int64_t kept_ld(int V) { return (int64_t(V) + 7) / 8 * 8; }

size_t kept_z_bytes(int T, int V) { return round_up(size_t(T) * size_t(kept_ld(V)) * sizeof(__half)); }

KeptLogits kept_layout(void* kept, int T, int V) {
  if (!kept) return {nullptr, 0, nullptr};
  char* base = static_cast<char*>(kept);
  return {reinterpret_cast<__half*>(base), kept_ld(V), reinterpret_cast<float*>(base + kept_z_bytes(T, V))};
}

// Whether the forward runs as tiles with the statistics in the GEMM's epilogue (cuda/lm_head_tile_stats.cu): on a
// GPU that runs that Hopper kernel, when both operands can be tensor-mapped. The saved variant's backward asks
// again with the same pointers, to know the width its forward kept a max for.
bool tile_path(const bf16* h, const bf16* w, int C, const GpuContext& ctx) {
  return lm_head_tile_stats_runs(ctx) && tensor_map_fits(h, C) && tensor_map_fits(w, C);
}

// The backward from kept logits: per row block (its fp32 dh block in the scratch), dlogits in place of the kept
// logits, then two GEMMs over the whole vocabulary: dh += dlogits W and dW += dlogits^T h.
void backward_kept(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h, const bf16* w,
                   const int32_t* targets, const float* lse, const float* entropy, KeptLogits k, int T, int C, int V,
                   float temperature, int chunk_v, const GpuContext& ctx) {
  const int cv = tile_path(h, w, C, ctx) ? kLmHeadTileV : std::min(chunk_v, V);  // the width of the kept maxima
  const int RB = row_block(T, size_t(C) * sizeof(float) + 64);
  float* dhb = static_cast<float*>(gemm_scratch(round_up(size_t(RB) * C * sizeof(float)), ctx));
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int R = std::min(RB, T - r0);
    __half* zb = k.z + int64_t(r0) * k.ld;
    lm_head_saved_dlogits(zb, k.ld, k.max + r0, T, R, V, cv, targets + r0, dlogprob + r0,
                          dentropy ? dentropy + r0 : nullptr, lse + r0, entropy ? entropy + r0 : nullptr, temperature,
                          ctx);
    const bf16* dz = reinterpret_cast<const bf16*>(zb);  // the dlogits, written over the kept logits
    gemm(false, false, R, C, V, 1.f, dz, int(k.ld), w, C, 0.f, dhb, GemmOut::f32, C, nullptr, ctx);
    gemm(/*trans_a=*/true, false, V, C, R, 1.f, dz, int(k.ld), h + int64_t(r0) * C, C, 1.f, dw, GemmOut::f32, C,
         nullptr, ctx);
    accumulate_f32_into_bf16(dh + int64_t(r0) * C, dhb, int64_t(R) * C, ctx);
  }
}

// The tile path's forward: per row block, the logits GEMM with per-tile statistics in its epilogue, then one
// kernel that folds each row's tiles into `out`. The saved variant's per-tile maxima are written where the kept
// layout holds its chunk maxima (a chunk is a tile here).
void forward_tiles(const bf16* h, const bf16* w, const int32_t* targets, int T, int C, int V, int vocab_begin,
                   float temperature, LmHeadRowOutputs out, void* kept, const GpuContext& ctx) {
  const KeptLogits k = kept_layout(kept, T, V);
  const size_t tiles = size_t((V + kLmHeadTileV - 1) / kLmHeadTileV);
  const size_t per_tile = k.z ? 2 : 3;  // s, u (and m unless kept holds it)
  const int RB = row_block(T, tiles * per_tile * sizeof(float) + sizeof(float) + 64);
  const size_t arr = round_up(tiles * size_t(RB) * sizeof(float));
  char* base = static_cast<char*>(gemm_scratch(per_tile * arr + round_up(size_t(RB) * sizeof(float)), ctx));
  float* s = reinterpret_cast<float*>(base);
  float* u = reinterpret_cast<float*>(base + arr);
  float* m = k.z ? nullptr : reinterpret_cast<float*>(base + 2 * arr);
  float* zt = reinterpret_cast<float*>(base + per_tile * arr);
  const CUtensorMap w_map = tensor_map_bf16_2d(w, V, C, kLmHeadTileV);
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int R = std::min(RB, T - r0);
    const CUtensorMap h_map = tensor_map_bf16_2d(h + int64_t(r0) * C, R, C, kLmHeadTileRows);
    const LmHeadTileStats ts{k.z ? k.max + r0 : m, k.z ? int64_t(T) : int64_t(RB), s, u, RB, zt};
    lm_head_tile_stats(h_map, w_map, R, V, C, vocab_begin, temperature, targets + r0, ts,
                       k.z ? k.z + int64_t(r0) * k.ld : nullptr, k.ld, ctx);
    lm_head_tile_combine(ts, R, V, vocab_begin, targets + r0, at_row(out, r0), ctx);
  }
}

// The forward over the vocabulary rows W[0, V) whose global ids start at vocab_begin: per row block, every chunk's
// logits folded into the row state; the last chunk writes `out` (offset to the block by at_row).
// kept (may be null): where the saved variant keeps the logits (kept_layout).
void forward_rows(const bf16* h, const bf16* w, const int32_t* targets, int T, int C, int V, int vocab_begin,
                  float temperature, int chunk_v, LmHeadRowOutputs out, void* kept, const GpuContext& ctx) {
  if (tile_path(h, w, C, ctx)) return forward_tiles(h, w, targets, T, C, V, vocab_begin, temperature, out, kept, ctx);
  const int cv = std::min(chunk_v, V);
  // Per row: the logits chunk (fp32) and the state m, zt (fp32), s, u (fp64).
  const int RB = row_block(T, size_t(cv) * sizeof(float) + 2 * sizeof(float) + 2 * sizeof(double) + 64);
  const size_t z_bytes = round_up(size_t(RB) * cv * sizeof(float));
  const size_t d_bytes = round_up(size_t(RB) * sizeof(double));
  const size_t f_bytes = round_up(size_t(RB) * sizeof(float));
  char* base = static_cast<char*>(gemm_scratch(z_bytes + 2 * d_bytes + 2 * f_bytes, ctx));
  float* z = reinterpret_cast<float*>(base);
  LmHeadRowState st{reinterpret_cast<float*>(base + z_bytes + 2 * d_bytes),
                    reinterpret_cast<double*>(base + z_bytes), reinterpret_cast<double*>(base + z_bytes + d_bytes),
                    reinterpret_cast<float*>(base + z_bytes + 2 * d_bytes + f_bytes)};

  const KeptLogits k = kept_layout(kept, T, V);
  for (int r0 = 0; r0 < T; r0 += RB) {
    const int R = std::min(RB, T - r0);
    const LmHeadRowOutputs ob = at_row(out, r0);
    for (int v0 = 0; v0 < V; v0 += cv) {
      const int n = std::min(cv, V - v0);
      logits_chunk(z, h + int64_t(r0) * C, w, R, C, v0, n, temperature, ctx);
      const LmHeadSavedChunk sc{k.z ? k.z + int64_t(r0) * k.ld + v0 : nullptr, k.ld,
                                k.z ? k.max + int64_t(v0 / cv) * T + r0 : nullptr};
      lm_head_chunk_stats(z, R, n, vocab_begin + v0, v0 == 0, v0 + n >= V, targets + r0, st, ob, sc, ctx);
    }
  }
}

// The backward over the vocabulary rows W[0, V) whose global ids start at vocab_begin: dh += dlogits W (through an
// fp32 block buffer, one bf16 rounding per row block), dW[0, V) += dlogits^T h.
void backward_rows(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h, const bf16* w,
                   const int32_t* targets, const float* lse, const float* entropy, int T, int C, int V,
                   int vocab_begin, float temperature, int chunk_v, const GpuContext& ctx) {
  const int cv = std::min(chunk_v, V);
  // Per row: the logits chunk (fp32), dlogits (bf16) and dh of the block (fp32).
  const int RB = row_block(T, size_t(cv) * (sizeof(float) + sizeof(bf16)) + size_t(C) * sizeof(float) + 64);
  const size_t z_bytes = round_up(size_t(RB) * cv * sizeof(float));
  const size_t dz_bytes = round_up(size_t(RB) * cv * sizeof(bf16));
  const size_t dh_bytes = round_up(size_t(RB) * C * sizeof(float));
  char* base = static_cast<char*>(gemm_scratch(z_bytes + dz_bytes + dh_bytes, ctx));
  float* z = reinterpret_cast<float*>(base);
  bf16* dz = reinterpret_cast<bf16*>(base + z_bytes);
  float* dhb = reinterpret_cast<float*>(base + z_bytes + dz_bytes);

  for (int r0 = 0; r0 < T; r0 += RB) {
    const int R = std::min(RB, T - r0);
    const bf16* hb = h + int64_t(r0) * C;
    for (int v0 = 0; v0 < V; v0 += cv) {
      const int n = std::min(cv, V - v0);
      logits_chunk(z, hb, w, R, C, v0, n, temperature, ctx);
      lm_head_chunk_dlogits(dz, z, R, n, vocab_begin + v0, targets + r0, dlogprob + r0,
                            dentropy ? dentropy + r0 : nullptr, lse + r0, entropy ? entropy + r0 : nullptr,
                            temperature, ctx);
      // dhb[R, C] (=, then +=) dz[R, n] W[v0 : v0 + n, C]
      gemm(false, false, R, C, n, 1.f, dz, n, w + int64_t(v0) * C, C, v0 == 0 ? 0.f : 1.f, dhb, GemmOut::f32, C,
           nullptr, ctx);
      // dW[v0 : v0 + n, C] += dz^T[n, R] h[R, C]
      gemm(/*trans_a=*/true, false, n, C, R, 1.f, dz, n, hb, C, 1.f, dw + int64_t(v0) * C, GemmOut::f32, C, nullptr,
           ctx);
    }
    accumulate_f32_into_bf16(dh + int64_t(r0) * C, dhb, int64_t(R) * C, ctx);
  }
}

void check_slice(int V, int vocab_begin, int vocab_valid) {
  HONE_CHECK(vocab_begin >= 0, "vocab_begin must not be negative, got ", vocab_begin);
  HONE_CHECK(vocab_valid >= 0 && vocab_valid <= V, "vocab_valid ", vocab_valid, " outside [0, ", V, "]");
}

}  // namespace

void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v,
                             const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  if (T == 0) return;
  forward_rows(h, w, targets, T, C, V, 0, temperature, chunk_v, LmHeadRowOutputs{logprob, entropy, lse, nullptr, 0},
               nullptr, ctx);
}

void lm_head_logprob_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                              const bf16* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v, const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  if (T == 0) return;
  backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, V, 0, temperature, chunk_v, ctx);
}

size_t lm_head_saved_bytes(int T, int V, int chunk_v) {
  // The maxima of the chunks or of the tile path's tiles, whichever are more (the path is chosen at the call).
  const int cv = std::min({chunk_v, V, kLmHeadTileV});
  const size_t chunks = size_t((V + cv - 1) / cv);
  return kept_z_bytes(T, V) + round_up(chunks * size_t(T) * sizeof(float));
}

void lm_head_saved_forward(float* logprob, float* entropy, float* lse, void* saved, const bf16* h, const bf16* w,
                           const int32_t* targets, int T, int C, int V, float temperature, int chunk_v,
                           const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(saved != nullptr, "the saved LM head needs its buffer");
  if (T == 0) return;
  forward_rows(h, w, targets, T, C, V, 0, temperature, chunk_v, LmHeadRowOutputs{logprob, entropy, lse, nullptr, 0},
               saved, ctx);
}

void lm_head_saved_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                            const bf16* w, const int32_t* targets, const float* lse, const float* entropy, void* saved,
                            int T, int C, int V, float temperature, int chunk_v, const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  HONE_CHECK(saved != nullptr, "the saved LM head needs its buffer");
  if (T == 0) return;
  backward_kept(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, kept_layout(saved, T, V), T, C, V,
                temperature, chunk_v, ctx);
}

// The slice's chunks are its first vocab_valid rows of W: padding rows are never multiplied.
void lm_head_vocab_slice_forward(float* stats, const bf16* h, const bf16* w, const int32_t* targets, int T, int C,
                                 int V, int vocab_begin, int vocab_valid, float temperature, int chunk_v,
                                 const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  check_slice(V, vocab_begin, vocab_valid);
  if (T == 0) return;
  if (vocab_valid == 0) return lm_head_stats_empty(stats, T, ctx);
  forward_rows(h, w, targets, T, C, vocab_valid, vocab_begin, temperature, chunk_v,
               LmHeadRowOutputs{nullptr, nullptr, nullptr, stats, T}, nullptr, ctx);
}

void lm_head_vocab_slice_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                                  const bf16* w, const int32_t* targets, const float* lse, const float* entropy,
                                  int T, int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                  int chunk_v, const GpuContext& ctx) {
  check_args(T, C, V, temperature, chunk_v);
  check_slice(V, vocab_begin, vocab_valid);
  HONE_CHECK(dentropy == nullptr || entropy != nullptr, "the entropy gradient needs the saved entropy");
  if (T == 0 || vocab_valid == 0) return;
  backward_rows(dh, dw, dlogprob, dentropy, h, w, targets, lse, entropy, T, C, vocab_valid, vocab_begin, temperature,
                chunk_v, ctx);
}

void lm_head_logits(float* logits, const bf16* h, const bf16* w, int T, int C, int V, const GpuContext& ctx) {
  HONE_CHECK(T >= 0 && C > 0 && V > 0, "bad LM head shape T=", T, " C=", C, " V=", V);
  if (T == 0) return;
  gemm(false, /*trans_b=*/true, T, V, C, 1.f, h, C, w, C, 0.f, logits, GemmOut::f32, V, nullptr, ctx);
}

}  // namespace hone::cuda
