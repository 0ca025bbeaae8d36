// The decoder layer body on the CPU (fp32 ops): its forward and backward, written once and used by every CPU pass
// (training and logprob in model/transformer.cpp, prefill and decode in generation/cached_forward.cpp). It computes
// with a LayerShape (this rank's heads and widths), and has three seams:
//   attention     between RoPE and o_proj: packed causal attention for training (PackedAttention below), the KV
//                 cache's prefill or decode attention for generation;
//   feed-forward  between the post-attention norm and the last residual add: the dense SwiGLU MLP
//                 (DenseFeedForward below) or another feed-forward (a mixture of experts);
//   collectives   where a tensor-parallel layer's partial sums cross ranks (model/layer_collectives.h); nullptr at
//                 tp = 1.
// The caller owns every buffer; a layer only reads and writes the pointers it is given.
#pragma once

#include <cstdint>
#include <memory>

#include "model/layer_collectives.h"
#include "model/layer_shape.h"
#include "model/weights.h"

namespace hone {

// The packed batch as the layer sees it.
struct LayerBatch {
  const int32_t* positions = nullptr;   // [T]
  const int32_t* cu_seqlens = nullptr;  // [S+1]
  int T = 0;
  int S = 0;
  const float* inv_freq = nullptr;      // [D/2] RoPE frequencies
};

// What a layer's forward writes and its backward reads. Sizes per token in parentheses; C hidden, Q = heads*D,
// K = kv_heads*D, I intermediate (this rank's). Without qk_norm, q_n/k_n alias q/k and rstd_q/rstd_k are unused.
// Rows: T tokens, except those marked [local]: local_rows(T) rows under sequence parallelism
// (model/layer_collectives.h). Without it, h1_local/h2_local alias h1/h2 and row_out is null; with it, h1, h2
// and row_out are one place shared by the layers (carve_gathered_rows), written again where they are read.
struct LayerActivations {
  const float* x_in = nullptr;  // (C) [local] layer input: the residual stream, owned by the caller
  float* rstd1 = nullptr;       // (1) [local] input RMSNorm
  float* h1_local = nullptr;    // (C) [local] its output
  float* h1 = nullptr;          // (C) its output on all T rows (gathered under sequence parallelism)
  float* q = nullptr;           // (Q) projections (+bias)
  float* k = nullptr;           // (K)
  float* v = nullptr;           // (K)
  float* q_n = nullptr;         // (Q) per-head RMSNorm of q (Qwen3)
  float* k_n = nullptr;         // (K)
  float* rstd_q = nullptr;      // (Hq)
  float* rstd_k = nullptr;      // (Hkv)
  float* q_r = nullptr;         // (Q) after RoPE
  float* k_r = nullptr;         // (K)
  float* attn = nullptr;        // (Q) attention output
  float* lse = nullptr;         // (Hq) attention log-sum-exp, [Hq, T]
  float* x_mid = nullptr;       // (C) [local] residual after attention
  float* rstd2 = nullptr;       // (1) [local] post-attention RMSNorm
  float* h2_local = nullptr;    // (C) [local]
  float* h2 = nullptr;          // (C)
  float* gate = nullptr;        // (I)
  float* up = nullptr;          // (I)
  float* act = nullptr;         // (I) silu(gate) * up
  float* row_out = nullptr;     // (C) sequence parallelism: a row-parallel GEMM's partial sums before the scatter
};

// Points a's buffers (all but x_in) into `base` for T tokens of which local_rows are this rank's residual rows
// (T without sequence parallelism: the default) and returns the floats they take (64-byte aligned regions). With
// base == nullptr it only returns the size.
int64_t carve_layer_activations(LayerActivations& a, float* base, const LayerShape& s, int T, int local_rows = -1);
// Sequence parallelism: points a.h1, a.h2 and a.row_out ([T, C] each) into `base`, as carve_layer_activations.
int64_t carve_gathered_rows(LayerActivations& a, float* base, const LayerShape& s, int T);

// Scratch for gradients inside a layer's backward (contents are not kept between layers).
struct LayerGradScratch {
  float* dh = nullptr;                                  // (C)
  float* dh_local = nullptr, *dy = nullptr;             // sequence parallelism: (C) [local] and (C) gathered
  float* dact = nullptr, *dgate = nullptr, *dup = nullptr;  // (I) each
  float* dattn = nullptr, *dq_r = nullptr, *dq_n = nullptr, *dq = nullptr;  // (Q) each
  float* dk_r = nullptr, *dk_n = nullptr, *dk = nullptr, *dv = nullptr;     // (K) each
};
// As carve_layer_activations, for the gradient scratch.
int64_t carve_layer_grad_scratch(LayerGradScratch& g, float* base, const LayerShape& s, int T, int local_rows = -1);

// The attention seam: reads a.q_r [T, Q], a.k_r and a.v [T, K] of layer `layer`'s rows and writes a.attn [T, Q]
// (and a.lse [heads, T] where a backward follows). Its backward, from dattn = d(loss)/d(a.attn) [T, Q] and what
// forward saved (a.attn, a.lse), ACCUMULATES into dq_r [T, Q], dk_r and dv [T, K]. Only training runs a backward:
// the seams of generation (the KV cache's attention) have none and refuse it. Context parallelism is an
// implementation of this seam (parallel/ring_attention.h).
class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  virtual void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations& a) = 0;
  virtual void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations& a, const float* dattn,
                        float* dq_r, float* dk_r, float* dv);
};

// Training and logprob: causal attention within each packed sequence (b.cu_seqlens), keeping lse for backward.
class PackedAttention final : public LayerAttention {
 public:
  void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations& a) override;
  void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations& a, const float* dattn, float* dq_r,
                float* dk_r, float* dv) override;
};

// The feed-forward seam. Its forward reads the normed hidden state a.h2_local [local rows, C] (all-gathered into
// a.h2 [T, C] under sequence parallelism, as the column-parallel GEMMs' hook does it), writes this rank's partial
// sums of the branch output into y [T, C] and leaves their sum over the tensor-parallel group in out (this rank's
// rows; out may be y), where the body adds the residual. Its backward reads d(loss)/d(out) from dres [local rows,
// C] (not changing it), accumulates parameter gradients into g and leaves d(loss)/d(h2) of this rank's rows, summed
// over the group, in scratch.dh_local (the body's rmsnorm_backward reads it; the rest of scratch is free to use).
// `layer` lets an implementation keep per-layer state between a layer's forward and its backward.
class LayerFeedForward {
 public:
  virtual ~LayerFeedForward() = default;
  virtual void forward(int layer, const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                       const LayerActivations& a, LayerCollectives<float>* collectives, float* y, float* out) = 0;
  virtual void backward(int layer, const LayerShape& s, const LayerWeights& w, LayerWeights& g, const LayerBatch& b,
                        const LayerActivations& a, const LayerGradScratch& scratch,
                        LayerCollectives<float>* collectives, float* dres) = 0;
};

// Llama / Qwen2 / Qwen3: down(silu(gate(h2)) * up(h2)), gate/up column-parallel, down row-parallel; keeps a.gate,
// a.up and a.act for the backward.
class DenseFeedForward final : public LayerFeedForward {
 public:
  void forward(int layer, const LayerShape& s, const LayerWeights& w, const LayerBatch& b, const LayerActivations& a,
               LayerCollectives<float>* collectives, float* y, float* out) override;
  void backward(int layer, const LayerShape& s, const LayerWeights& w, LayerWeights& g, const LayerBatch& b,
                const LayerActivations& a, const LayerGradScratch& scratch, LayerCollectives<float>* collectives,
                float* dres) override;
};

template <typename E>
class ExpertDispatch;
// The feed-forward of c's layers (what a model's passes give the layer body): DenseFeedForward, or for a mixture
// of experts the MoeFeedForward (model/moe_feed_forward.h) over `dispatch` (null: this rank holds every expert).
std::unique_ptr<LayerFeedForward> make_layer_feed_forward(const ModelConfig& c,
                                                          ExpertDispatch<float>* dispatch = nullptr);

// Computes layer `layer` on a.x_in and writes its output (the next residual stream) to x_out [T, C] (under
// sequence parallelism, x_in and x_out hold this rank's local rows).
void layer_forward(int layer, const LayerShape& s, const LayerWeights& w, const LayerBatch& b,
                   const LayerActivations& a, LayerAttention& attention, LayerFeedForward& feed_forward,
                   LayerCollectives<float>* collectives, float* x_out);
// dres [T, C] ([local rows, C] under sequence parallelism) holds d(loss)/d(x_out) on entry and d(loss)/d(x_in) on
// return; parameter gradients accumulate into g (same shapes as w). `attention` and `feed_forward` are the seams
// the forward ran.
void layer_backward(int layer, const LayerShape& s, const LayerWeights& w, LayerWeights& g, const LayerBatch& b,
                    const LayerActivations& a, const LayerGradScratch& scratch, LayerAttention& attention,
                    LayerFeedForward& feed_forward, LayerCollectives<float>* collectives, float* dres);

}  // namespace hone
