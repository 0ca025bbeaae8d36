// The decoder layer body (Llama / Qwen2 / Qwen3), forward and backward, written once over a backend B
// (backend/backend.h: fp32 on the CPU, bf16 on a GPU stream) and used by every pass: training and logprob
// (model/transformer.cpp), prefill and decode (generation/). It computes with a
// LayerShape (this rank's heads and widths) and has three seams:
//   attention     between RoPE and o_proj: packed causal attention for training (PackedAttention below), the KV
//                 cache's prefill or decode attention for generation, the ring of context parallelism;
//   feed-forward  between the post-attention norm and the last residual add: the dense SwiGLU MLP
//                 (DenseFeedForward below) or a mixture of experts;
//   collectives   where a tensor-parallel layer's partial sums cross ranks (model/layer_collectives.h); nullptr at
//                 tp = 1.
// The post-attention residual add and RMSNorm are one backend op (fused on the GPU), and so are Qwen3's q/k norms
// and RoPE. The caller owns every buffer; a layer only reads and writes the pointers it is given. Activation
// gradients are not zeroed: the first op to produce one writes it and the ops after it add to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/layer_collectives.h"
#include "model/layer_shape.h"
#include "model/param_table.h"

namespace hone {

struct ModelConfig;

// A layer's compute weights (the backend's element type) and its fp32 parameter gradients, as pointers into the
// flat buffers (model/param_table.h; null where the architecture has no such parameter).
template <typename B>
using LayerWeightPtrs = LayerParams<const typename B::Act*>;
using LayerGradPtrs = LayerParams<float*>;

// A mixture of experts' routing of one pass (model/moe_feed_forward.h), arguments of the pass rather than state of
// the feed-forward, so that a layer recomputed in backward routes as its forward did. Tables are in the backend's
// memory, [T, sparse layers, k] (sparse layer i of layer order, row t, choice j at (t * sparse_layers + i) * k + j).
struct MoeRouting {
  // Routing replay: each row's experts taken from here instead of the top-k (the weights are still the current
  // router's probabilities at those experts, renormalized as configured); rows that carry -1 keep their own top-k.
  // Null: none.
  const int32_t* forced = nullptr;
  // Routing record: every sparse layer's forward writes each row's k experts here (generation records its routing
  // so, and the training forward for comparison). Null: none.
  int32_t* record = nullptr;
  // The weight of the load-balancing loss in the loss the pass's backward differentiates (0: no aux gradient).
  double aux_loss_weight = 0;
};

// The packed batch as a layer sees it (host memory on the CPU, device memory on the GPU).
struct LayerBatch {
  const int32_t* positions = nullptr;   // [T]
  const int32_t* cu_seqlens = nullptr;  // [S+1]
  int T = 0;
  int S = 0;
  int max_seqlen = 0;                   // the longest sequence (the GPU sizes its attention plans by it)
  const float* inv_freq = nullptr;      // [D/2] RoPE frequencies
  MoeRouting routing;                   // a mixture of experts' (ignored by a dense feed-forward)
  // Rows past the first counted_rows are padding (sequence parallelism pads a batch to a multiple of tp): routed like
  // any row but left out of the load-balancing loss and the expert loads. -1: every row counts.
  int counted_rows = -1;
};

// What a layer's forward writes and its backward reads (B::Act unless marked fp32). Sizes per token in parentheses;
// C hidden, Q = heads*D, K = kv_heads*D, I intermediate (this rank's). The normed q and k are not kept: the fused
// norm + RoPE's backward needs only q, k and rstd; without qk_norm rstd_q/rstd_k are null. Rows: T tokens, except
// those marked [local]: local_rows(T) rows under sequence parallelism (model/layer_collectives.h). Without it
// h1_local/h2_local alias h1/h2; with it h1 and h2 are one place shared by the layers (carve_gathered_rows),
// gathered again where they are read.
template <typename B>
struct LayerActivations {
  using A = typename B::Act;
  const A* x_in = nullptr;  // (C) [local] layer input: the residual stream, owned by the caller
  float* rstd1 = nullptr;   // (1) [local] fp32, input RMSNorm
  A* h1_local = nullptr;    // (C) [local] its output
  A* h1 = nullptr;          // (C) its output on all T rows
  A* q = nullptr, *k = nullptr, *v = nullptr;  // (Q), (K), (K) projections (+bias)
  // A pass without backward (a decode step) may ask for one QKV GEMM (fuse_qkv): where the projections have no
  // biases and the weights hold q_proj, k_proj and v_proj back to back, the layer writes the product [T, Q + 2K]
  // from q on (the region q, k and v are carved in) and hands the attention seam a copy whose k and v point at
  // their column blocks, qkv_ld apart (0: rows of their own).
  bool fuse_qkv = false;
  int64_t qkv_ld = 0;
  float* rstd_q = nullptr, *rstd_k = nullptr;  // (Hq), (Hkv) fp32
  A* q_r = nullptr, *k_r = nullptr;            // (Q), (K) after the norm and RoPE
  A* attn = nullptr;                           // (Q) attention output
  float* lse = nullptr;                        // (Hq) fp32 attention log-sum-exp, [Hq, T]
  A* x_mid = nullptr;                          // (C) [local] residual after attention
  float* rstd2 = nullptr;                      // (1) [local] fp32 post-attention RMSNorm
  A* h2_local = nullptr;                       // (C) [local]
  A* h2 = nullptr;                             // (C)
  A* gate = nullptr, *up = nullptr, *act = nullptr;  // (I) act = silu(gate) * up
  char* ffn = nullptr;  // what a feed-forward keeps per layer besides these (a GPU mixture of experts' routing)
};

// Scratch inside a layer: the o_proj / down_proj output before the residual add (forward), and the activation
// gradients (backward). Contents are not kept between layers. [local] as above; without sequence parallelism
// branch_local aliases branch, dh_local dh, and dy is null.
template <typename B>
struct LayerScratch {
  using A = typename B::Act;
  A* branch = nullptr;        // (C) a row-parallel GEMM's output (partial sums under tensor parallelism)
  A* branch_local = nullptr;  // (C) [local] their sum over the group, this rank's rows
  char* ffn = nullptr, *ffn_backward = nullptr;  // a feed-forward's own forward and backward scratch
  A* dh = nullptr;            // (C)
  A* dh_local = nullptr;      // (C) [local]
  A* dy = nullptr;            // (C) the residual gradient gathered to all T rows
  A* dact = nullptr, *dgate = nullptr, *dup = nullptr;  // (I)
  A* dattn = nullptr, *dq_r = nullptr, *dq = nullptr;   // (Q)
  A* dk_r = nullptr, *dk = nullptr, *dv = nullptr;      // (K)
};

// What a feed-forward keeps per layer beyond the dense MLP's activations (LayerActivations::ffn) and needs as
// forward and backward scratch for T rows (LayerScratch::ffn, ffn_backward): a mixture of experts' routing and rows.
struct FeedForwardBytes {
  size_t saved = 0, forward_scratch = 0, backward_scratch = 0;
};

// Points a's buffers (all but x_in) into `base` for T tokens of which local_rows are this rank's residual rows (T
// without sequence parallelism: the default) and returns the bytes they take (B::kAlignment-aligned regions). With
// base == nullptr it only counts. Under sequence parallelism h1 and h2 stay null: carve_gathered_rows.
template <typename B>
size_t carve_layer_activations(LayerActivations<B>& a, char* base, const LayerShape& s, int T, int local_rows = -1);
// Sequence parallelism: points a.h1 and a.h2 ([T, C] each) into `base`, as above.
template <typename B>
size_t carve_gathered_rows(LayerActivations<B>& a, char* base, const LayerShape& s, int T);
// The forward's scratch (branch, branch_local, ffn) and the backward's (the gradients, ffn_backward).
template <typename B>
size_t carve_layer_forward_scratch(LayerScratch<B>& scratch, char* base, const LayerShape& s, int T,
                                   int local_rows = -1);
template <typename B>
size_t carve_layer_backward_scratch(LayerScratch<B>& scratch, char* base, const LayerShape& s, int T,
                                    int local_rows = -1);

// The attention seam: reads a.q_r [T, Q], a.k_r and a.v [T, K] of layer `layer`'s rows (k and v qkv_ld apart when
// the projection was fused) and writes a.attn [T, Q] (and a.lse [heads, T] where a backward follows). Its backward,
// from dattn [T, Q] and what forward saved, WRITES dq_r [T, Q], dk_r and dv [T, K] (all T rows; the layer does not
// zero them first). Only training runs a backward: generation's seams have none and refuse it.
template <typename B>
class LayerAttention {
 public:
  using A = typename B::Act;
  virtual ~LayerAttention() = default;
  virtual void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
                       const typename B::Exec& x) = 0;
  virtual void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a, const A* dattn,
                        A* dq_r, A* dk_r, A* dv, const typename B::Exec& x);
};

// Training, logprob and prefill: causal attention within each packed sequence (b.cu_seqlens), keeping lse.
template <typename B>
class PackedAttention : public LayerAttention<B> {
 public:
  using A = typename B::Act;
  void forward(int layer, const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a,
               const typename B::Exec& x) override;
  void backward(const LayerShape& s, const LayerBatch& b, const LayerActivations<B>& a, const A* dattn, A* dq_r,
                A* dk_r, A* dv, const typename B::Exec& x) override;
};

// The feed-forward seam. Its forward reads the normed hidden state a.h2_local [local rows, C] (all-gathered into
// a.h2 [T, C] under sequence parallelism, as the column-parallel GEMMs' hook does it), writes this rank's partial
// sums of the branch output into y [T, C] and leaves their sum over the tensor-parallel group in out (this rank's
// rows; out may be y), where the body adds the residual. Its backward reads d(loss)/d(out) from dres [local rows,
// C] (not changing it), accumulates fp32 parameter gradients into g and leaves d(loss)/d(h2) of this rank's rows,
// summed over the group, in scratch.dh_local (the body's rmsnorm_backward reads it; the rest of scratch is free to
// use). `layer` lets an implementation keep per-layer state between a layer's forward and its backward.
template <typename B>
class LayerFeedForward {
 public:
  using A = typename B::Act;
  virtual ~LayerFeedForward() = default;
  virtual void forward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                       const LayerActivations<B>& a, const LayerScratch<B>& scratch, LayerCollectives<A>* collectives,
                       A* y, A* out, const typename B::Exec& x) = 0;
  virtual void backward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                        const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& scratch,
                        LayerCollectives<A>* collectives, A* dres, const typename B::Exec& x) = 0;
  // Gives back memory the feed-forward holds beyond the activations it is handed (the arenas' release).
  virtual void release(const typename B::Exec&) {}
};

// Llama / Qwen2 / Qwen3: down(silu(gate(h2)) * up(h2)), gate/up column-parallel, down row-parallel; keeps a.gate,
// a.up and a.act for the backward.
template <typename B>
class DenseFeedForward final : public LayerFeedForward<B> {
 public:
  using A = typename B::Act;
  void forward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerBatch& b,
               const LayerActivations<B>& a, const LayerScratch<B>& scratch, LayerCollectives<A>* collectives, A* y,
               A* out, const typename B::Exec& x) override;
  void backward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& scratch,
                LayerCollectives<A>* collectives, A* dres, const typename B::Exec& x) override;
};

template <typename E>
class ExpertDispatch;
// The feed-forward of c's layers (what a model's passes give the layer body): the dense MLP, or for a mixture of
// experts the backend's mixture-of-experts feed-forward over `dispatch` (null: this rank holds every expert).
template <typename B>
std::unique_ptr<LayerFeedForward<B>> make_layer_feed_forward(const ModelConfig& c,
                                                             ExpertDispatch<typename B::Act>* dispatch = nullptr);

// Computes layer `layer` on a.x_in and writes its output (the next residual stream) to x_out [local rows, C].
template <typename B>
void layer_forward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerBatch& b,
                   const LayerActivations<B>& a, const LayerScratch<B>& scratch, LayerAttention<B>& attention,
                   LayerFeedForward<B>& feed_forward, LayerCollectives<typename B::Act>* collectives,
                   typename B::Act* x_out, const typename B::Exec& x);
// dres [local rows, C] holds d(loss)/d(x_out) on entry and d(loss)/d(x_in) on return; fp32 parameter gradients
// accumulate into g (the norm weights' partial under sequence parallelism). `attention` and `feed_forward` are the
// seams the forward ran.
template <typename B>
void layer_backward(int layer, const LayerShape& s, const LayerWeightPtrs<B>& w, const LayerGradPtrs& g,
                    const LayerBatch& b, const LayerActivations<B>& a, const LayerScratch<B>& scratch,
                    LayerAttention<B>& attention, LayerFeedForward<B>& feed_forward,
                    LayerCollectives<typename B::Act>* collectives, typename B::Act* dres,
                    const typename B::Exec& x);

}  // namespace hone
