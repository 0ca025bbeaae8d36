// The CUDA twin of the op API (src/ops/ops.h), declared once. Same op names, same argument order, same conventions
// as the fp32 CPU reference, with GPU storage types:
//   * activations and weights in bf16, accumulation in fp32; softmax, logprob, entropy, lse, RMSNorm rstd in fp32;
//   * parameter gradients (dw, dbias, dwte, ...) in fp32 and ACCUMULATED (+=), as on the CPU;
//   * activation gradients (dx, dq, ...) in bf16 and ACCUMULATED (+=): computed in fp32, added to the bf16 value
//     already there, rounded once; except where an op takes an accumulate flag (false: the gradient is written, so
//     its first producer needs no zeroed buffer) and attention_backward, which writes, as on the CPU;
//   * every op takes the GpuContext (stream, library handles, workspace) last and is asynchronous on its stream.
// Plain header: CUDA headers only, so both .cu files (nvcc) and host .cpp files (g++) include it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/ops.h"

namespace hone::cuda {

using bf16 = __nv_bfloat16;

struct GpuContextImpl;  // library handles, plan caches (cuda/gpu_context.cpp)

// Everything an op needs besides its tensors. One per device and stream; not thread safe.
struct GpuContext {
  cudaStream_t stream = nullptr;
  GpuContextImpl* impl = nullptr;
  int sm_count = 0;
};

GpuContext create_gpu_context(int device);  // sets the device, creates stream, cuBLASLt and cuDNN handles, workspace
void destroy_gpu_context(GpuContext& ctx);

// ---- embedding: out[t, :] = wte[ids[t], :] --------------------------------------------------------------------------
void embedding_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, int C, const GpuContext& ctx);
void embedding_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, int C, const GpuContext& ctx);
// Vocabulary-parallel, as cpu::embedding_slice_forward/backward: wte[V, C] holds rows [vocab_begin, vocab_begin + V);
// ids outside the slice give zero rows and no gradient.
void embedding_slice_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, int C, int vocab_begin, int V,
                             const GpuContext& ctx);
void embedding_slice_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, int C, int vocab_begin,
                              int V, const GpuContext& ctx);

// ---- RMSNorm over rows of C (also per-head q/k norm: rows = T*H, C = D) ----------------------------------------------
void rmsnorm_forward(bf16* out, float* rstd, const bf16* x, const bf16* w, int rows, int C, float eps,
                     const GpuContext& ctx);
// dx written, or (accumulate) added to; dw always accumulated. Without the flag: accumulated.
void rmsnorm_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                      int rows, int C, bool accumulate, const GpuContext& ctx);
inline void rmsnorm_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                             int rows, int C, const GpuContext& ctx) {
  rmsnorm_backward(dx, dw, dout, x, w, rstd, rows, C, /*accumulate=*/true, ctx);
}
// Fused residual add + RMSNorm (saves a pass over the residual stream): sum = a + b; out = rmsnorm(sum).
void add_rmsnorm_forward(bf16* sum, bf16* out, float* rstd, const bf16* a, const bf16* b, const bf16* w, int rows,
                         int C, float eps, const GpuContext& ctx);

// ---- linear: out[T, OC] = x[T, IC] W[OC, IC]^T (+ bias) through cuBLASLt (bf16 in, fp32 accumulate) ------------------
void linear_forward(bf16* out, const bf16* x, const bf16* w, const bf16* bias, int T, int IC, int OC,
                    const GpuContext& ctx);
// Two projections of one input with the same shape and no bias (gate/up, k/v): out0 = x W0^T, out1 = x W1^T, as
// cpu::linear_forward_pair. One batched GEMM where W1 and out1 lie after W0 and out0 (cuda/linear.cpp).
void linear_forward_pair(bf16* out0, bf16* out1, const bf16* x, const bf16* w0, const bf16* w1, int T, int IC, int OC,
                         const GpuContext& ctx);
// dx (bf16; written, or accumulated with accumulate_dx: the GEMM's beta), dw (fp32, accumulated), dbias (fp32,
// accumulated): each may be null (the input gradient of some rows and the weight gradient in separate calls, as the
// tensor-parallel layers do).
void linear_backward(bf16* dx, float* dw, float* dbias, const bf16* dout, const bf16* x, const bf16* w, int T, int IC,
                     int OC, bool accumulate_dx, const GpuContext& ctx);

// ---- RoPE on x[T, H, D] by position ids (inv_freq: D/2 fp32 values from cpu::rope_inv_freq, on the device) -----------
// The forward reads x's rows at a stride of ldx values (0: H * D), as cpu::rope_forward: q and k where one fused
// QKV projection left them. out is [T, H, D]; it may alias x only with rows of their own.
void rope_forward(bf16* out, const bf16* x, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                  const GpuContext& ctx, int64_t ldx = 0);
// dx written, or (accumulate) added to. Without the flag: accumulated.
void rope_backward(bf16* dx, const bf16* dout, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                   bool accumulate, const GpuContext& ctx);
inline void rope_backward(bf16* dx, const bf16* dout, const int32_t* pos, const float* inv_freq, int T, int H, int D,
                          const GpuContext& ctx) {
  rope_backward(dx, dout, pos, inv_freq, T, H, D, /*accumulate=*/true, ctx);
}

// ---- Qwen3's per-head q/k norm and RoPE in one pass (cuda/qk_norm_rope.cu), as cpu::qk_norm_rope_forward/backward:
// x, out, dout, dx [T, H, D] bf16, w [D] bf16, rstd [T*H] fp32, dw [D] fp32. The normed row stays in fp32 between
// the norm and the rotation (one rounding, of out). dx is WRITTEN, not accumulated (no zeroing needed); dw is
// ACCUMULATED. D a multiple of 16, at most 512; pointers 16-byte aligned. The forward allocates nothing and never
// waits for the host (it runs inside generation's CUDA graphs); out may alias x. The forward reads x's rows at a
// stride of ldx values (0: H * D; else a multiple of 8, and out must not alias x), as rope_forward.
void qk_norm_rope_forward(bf16* out, float* rstd, const bf16* x, const bf16* w, const int32_t* pos,
                          const float* inv_freq, int T, int H, int D, float eps, const GpuContext& ctx,
                          int64_t ldx = 0);
void qk_norm_rope_backward(bf16* dx, float* dw, const bf16* dout, const bf16* x, const bf16* w, const float* rstd,
                           const int32_t* pos, const float* inv_freq, int T, int H, int D, const GpuContext& ctx);

// ---- causal attention over packed variable-length sequences, GQA (cuDNN fused SDPA, plans cached by shape) ----------
// q[T, Hq, D], k/v[T, Hkv, D], out[T, Hq, D] bf16; lse[Hq, T] fp32 (natural-log log-sum-exp of the scaled scores).
// cu_seqlens (device, int32, num_seqs+1). max_seqlen: the longest sequence (the host knows it from packing).
void attention_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens,
                       int num_seqs, int max_seqlen, int T, int Hq, int Hkv, int D, float scale,
                       const GpuContext& ctx);
// dq/dk/dv bf16, WRITTEN on every row (cu_seqlens must cover [0, T)), not accumulated: cuDNN writes them in place,
// and attention is their first producer in the layer.
void attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                        const bf16* q, const bf16* k, const bf16* v, const int32_t* cu_seqlens, int num_seqs,
                        int max_seqlen, int T, int Hq, int Hkv, int D, float scale, const GpuContext& ctx);

// ---- attention blocks and their merge (ring attention of context parallelism), as cpu::attention_block_forward,
// attention_block_backward and attention_merge_forward. The segments' arrays are device memory; max_q and max_kv
// (host) size the cuDNN graphs. out/lse are written on the segments' query rows only; dq/dk/dv ACCUMULATED.
void attention_block_forward(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                             const AttentionSegments& seg, int Tq, int Tkv, int Hq, int Hkv, int D, float scale,
                             const GpuContext& ctx);
void attention_block_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* out, const float* lse,
                              const bf16* q, const bf16* k, const bf16* v, const AttentionSegments& seg, int Tq,
                              int Tkv, int Hq, int Hkv, int D, float scale, const GpuContext& ctx);
// The running result in fp32 (out[T, H, D], lse[H, T]: rounded to bf16 once, after the last block), the block's in
// bf16 (cuDNN's output) with its fp32 lse.
void attention_merge_forward(float* out, float* lse, const bf16* block_out, const float* block_lse,
                             const AttentionSegments& seg, int T, int H, int D, const GpuContext& ctx);

// ---- SwiGLU: out = silu(gate) * up -------------------------------------------------------------------------------------
void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int64_t N, const GpuContext& ctx);
// dgate and dup written, or (accumulate) added to.
void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int64_t N,
                     bool accumulate, const GpuContext& ctx);

// ---- residual add ------------------------------------------------------------------------------------------------------
void add_forward(bf16* out, const bf16* a, const bf16* b, int64_t N, const GpuContext& ctx);

// ---- LM head fused with log-softmax gather and entropy, in vocabulary chunks (no [T, V] buffer) ---------------------
// As cpu::lm_head_logprob_forward: logprob/entropy/lse fp32 [T]; targets < 0 give 0. entropy may be null.
void lm_head_logprob_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                             const int32_t* targets, int T, int C, int V, float temperature, int chunk_v,
                             const GpuContext& ctx);
// dh bf16 [T, C] (accumulated), dw fp32 [V, C] (accumulated); dentropy may be null.
void lm_head_logprob_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                              const bf16* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                              int C, int V, float temperature, int chunk_v, const GpuContext& ctx);
// As cpu::lm_head_saved_forward/backward: the LM head keeping its logits (training without recompute). saved:
// lm_head_saved_bytes(T, V, chunk_v) device bytes holding each chunk's logits in fp16 relative to the row's running
// max, and those maxima; the backward forms its bf16 dlogits in place of them.
size_t lm_head_saved_bytes(int T, int V, int chunk_v);
void lm_head_saved_forward(float* logprob, float* entropy, float* lse, void* saved, const bf16* h, const bf16* w,
                           const int32_t* targets, int T, int C, int V, float temperature, int chunk_v,
                           const GpuContext& ctx);
void lm_head_saved_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                            const bf16* w, const int32_t* targets, const float* lse, const float* entropy, void* saved,
                            int T, int C, int V, float temperature, int chunk_v, const GpuContext& ctx);
// Vocabulary-parallel, as cpu::lm_head_vocab_slice_forward, lm_head_stats_rescale, lm_head_stats_finish and
// lm_head_vocab_slice_backward: stats fp32 [4, T] (m, s, u, target logit), max fp32 [T]; h, w bf16, w [V, C] of
// which the first vocab_valid rows exist; dh bf16 (accumulated), dw fp32 (accumulated, padding rows untouched).
void lm_head_vocab_slice_forward(float* stats, const bf16* h, const bf16* w, const int32_t* targets, int T, int C,
                                 int V, int vocab_begin, int vocab_valid, float temperature, int chunk_v,
                                 const GpuContext& ctx);
void lm_head_stats_rescale(float* stats, const float* max, int T, const GpuContext& ctx);
void lm_head_stats_finish(float* logprob, float* entropy, float* lse, const float* stats, const int32_t* targets,
                          int T, const GpuContext& ctx);
void lm_head_vocab_slice_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                                  const bf16* w, const int32_t* targets, const float* lse, const float* entropy,
                                  int T, int C, int V, int vocab_begin, int vocab_valid, float temperature,
                                  int chunk_v, const GpuContext& ctx);
// Full logits for a few rows (generation): logits[T, V] fp32 = h W^T.
void lm_head_logits(float* logits, const bf16* h, const bf16* w, int T, int C, int V, const GpuContext& ctx);

// ---- optimizer and refit on flat fp32 buffers ----------------------------------------------------------------------
// One fused pass over the flat master buffer (all parameters are one contiguous array in hone).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t N, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step, const GpuContext& ctx);
// Sum of squares (for the global gradient norm), accumulated in double; synchronizes the stream to return it.
double sum_squares(const float* x, int64_t N, const GpuContext& ctx);
void scale_inplace(float* x, float s, int64_t N, const GpuContext& ctx);
// Refit: bf16 generation weights from fp32 master weights.
void refit_cast(bf16* out, const float* master, int64_t N, const GpuContext& ctx);
// Host-side helpers for tests and loading: bf16 <-> fp32 conversion on the device.
void f32_to_bf16(bf16* out, const float* in, int64_t N, const GpuContext& ctx);
void bf16_to_f32(float* out, const bf16* in, int64_t N, const GpuContext& ctx);

// ---- GRPO policy loss of one micro-batch (cuda/policy_loss.cu), as cpu::policy_loss_forward / _backward -------------
// Device arrays: fp32 logprobs, entropy and advantages, uint8 mask, int64 seq_offsets; old_lp may be new_lp (exactly
// on-policy), ref_lp and entropy may be null. Per-token terms in double; one block per sequence computes its valid
// tokens and seq_mask decision. Forward writes the stats[PolicyLossStat::count] doubles on the device (reduced over
// the sequences in a fixed order: reproducible); backward accumulates fp32 dnew_lp and dentropy (may be null).
void policy_loss_forward(double* stats, const float* new_lp, const float* old_lp, const float* gen_lp,
                         const float* ref_lp, const float* entropy, const uint8_t* mask, const int64_t* seq_offsets,
                         const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                         double denominator, const GpuContext& ctx);
void policy_loss_backward(float* dnew_lp, float* dentropy, const float* new_lp, const float* old_lp,
                          const float* gen_lp, const float* ref_lp, const uint8_t* mask, const int64_t* seq_offsets,
                          const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                          double denominator, const GpuContext& ctx);

}  // namespace hone::cuda
