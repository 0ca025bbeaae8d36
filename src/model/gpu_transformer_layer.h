// The decoder layer body on the GPU (bf16 activations, fp32 statistics, CUDA ops of cuda/ops_cuda.h), written once
// and used by every GPU pass (training and logprob in model/gpu_transformer.cpp, prefill and decode in
// generation/gpu_generation_forward.cpp): the device twin of model/transformer_layer.h, with the same order of ops,
// the same saved activations and the same seams (attention; feed-forward: the dense MLP or another, a mixture of
// experts; the collectives hook, nullptr at tp = 1). The caller owns every buffer; a layer only reads and writes the
// pointers it is given.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <memory>

#include "cuda/ops_cuda.h"
#include "model/layer_collectives.h"
#include "model/layer_shape.h"
#include "model/param_table.h"

namespace hone {

class GpuOpProfiler;
struct ModelConfig;

using bf16 = cuda::bf16;

// A layer's parameters (or gradients) as device pointers into a flat buffer (model/param_table.h).
template <typename T>
using GpuLayerParams = LayerParams<T*>;

// The packed batch as a layer sees it, on the device.
struct GpuLayerBatch {
  const int32_t* positions = nullptr;   // [T]
  const int32_t* cu_seqlens = nullptr;  // [S+1]
  int T = 0;
  int S = 0;
  int max_seqlen = 0;
  const float* inv_freq = nullptr;      // [D/2]
};

// Saved activations, as LayerActivations on the CPU (bf16 unless marked fp32), less the q/k norms' outputs (the
// fused norm + RoPE, cuda::qk_norm_rope_forward, goes from q and k to q_r and k_r). Without qk_norm rstd_q/rstd_k
// are null. Rows: T tokens, except those marked [local]: local_rows(T) rows under sequence parallelism
// (model/layer_collectives.h). Without it h1_local/h2_local alias h1/h2; with it h1 and h2 are one place shared by
// the layers (carve_gpu_gathered_rows), gathered again where they are read.
struct GpuLayerActivations {
  const bf16* x_in = nullptr;  // (C) [local] layer input, owned by the caller
  float* rstd1 = nullptr;      // (1) [local] fp32
  bf16* h1_local = nullptr;    // (C) [local] the input RMSNorm's output
  bf16* h1 = nullptr;          // (C) the same on all T rows
  bf16* q = nullptr, *k = nullptr, *v = nullptr;
  // A pass without backward (a decode step) may ask for one QKV GEMM (fuse_qkv): where the projections have no
  // biases and the parameter table holds q_proj, k_proj and v_proj back to back, the layer writes the product
  // [T, Q + 2K] from q on (the region q, k and v are carved in) and hands the attention seam a copy whose k and v
  // point at their column blocks, qkv_ld apart (0: rows of their own).
  bool fuse_qkv = false;
  int64_t qkv_ld = 0;
  float* rstd_q = nullptr, *rstd_k = nullptr;  // (Hq), (Hkv) fp32
  bf16* q_r = nullptr, *k_r = nullptr;
  bf16* attn = nullptr;        // (Q)
  float* lse = nullptr;        // (Hq) fp32, [Hq, T]
  bf16* x_mid = nullptr;       // (C) [local]
  float* rstd2 = nullptr;      // (1) [local] fp32
  bf16* h2_local = nullptr;    // (C) [local]
  bf16* h2 = nullptr;          // (C)
  bf16* gate = nullptr, *up = nullptr, *act = nullptr;  // (I)
  char* ffn = nullptr;         // a mixture of experts' saved routing and rows (model/gpu_moe_feed_forward.h)
};

// Points a's buffers (all but x_in) into `base` for T tokens of which local_rows are this rank's residual rows (T
// without sequence parallelism: the default) and returns the bytes they take (every region 256-byte aligned).
// With base == nullptr it only counts. Under sequence parallelism h1 and h2 stay null: carve_gpu_gathered_rows.
size_t carve_gpu_layer_activations(GpuLayerActivations& a, char* base, const LayerShape& s, int T,
                                   int local_rows = -1);
// Sequence parallelism: points a.h1 and a.h2 ([T, C] each) into `base`, as above.
size_t carve_gpu_gathered_rows(GpuLayerActivations& a, char* base, const LayerShape& s, int T);

// Scratch inside a layer: the o_proj / down_proj output before the residual add (forward), and the activation
// gradients (backward). Contents are not kept between layers. [local] as above; without sequence parallelism
// branch_local aliases branch, dh_local dh, and dy is null.
struct GpuLayerScratch {
  bf16* branch = nullptr;        // (C) a row-parallel GEMM's output (partial sums under tensor parallelism)
  bf16* branch_local = nullptr;  // (C) [local] their sum over the group, this rank's rows
  char* ffn = nullptr, *ffn_backward = nullptr;  // a mixture of experts' forward and backward scratch
  bf16* dh = nullptr;            // (C)
  bf16* dh_local = nullptr;      // (C) [local]
  bf16* dy = nullptr;            // (C) the residual gradient gathered to all T rows
  bf16* dact = nullptr, *dgate = nullptr, *dup = nullptr;                 // (I)
  bf16* dattn = nullptr, *dq_r = nullptr, *dq = nullptr;  // (Q)
  bf16* dk_r = nullptr, *dk = nullptr, *dv = nullptr;     // (K)
};
size_t carve_gpu_layer_forward_scratch(GpuLayerScratch& scratch, char* base, const LayerShape& s, int T,
                                       int local_rows = -1);
size_t carve_gpu_layer_backward_scratch(GpuLayerScratch& scratch, char* base, const LayerShape& s, int T,
                                        int local_rows = -1);

// The attention seam: reads a.q_r [T, Q], a.k_r and a.v [T, K] of layer `layer`'s rows and writes a.attn [T, Q]
// (and a.lse [heads, T] where a backward follows), on ctx's stream. Its backward, from dattn [T, Q] and what forward
// saved, WRITES dq_r [T, Q], dk_r and dv [T, K] (all T rows; the layer does not zero them first); generation's
// seams have none and refuse it. Context parallelism is an implementation of this seam
// (parallel/gpu_ring_attention.h: its local block writes, the other ranks' blocks add to that).
class GpuLayerAttention {
 public:
  virtual ~GpuLayerAttention() = default;
  virtual void forward(int layer, const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a,
                       const cuda::GpuContext& ctx) = 0;
  virtual void backward(const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a, const bf16* dattn,
                        bf16* dq_r, bf16* dk_r, bf16* dv, const cuda::GpuContext& ctx);
};

// Training, logprob and prefill: causal attention within each packed sequence (cuDNN over b.cu_seqlens).
class GpuPackedAttention : public GpuLayerAttention {
 public:
  void forward(int layer, const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a,
               const cuda::GpuContext& ctx) override;
  void backward(const LayerShape& s, const GpuLayerBatch& b, const GpuLayerActivations& a, const bf16* dattn,
                bf16* dq_r, bf16* dk_r, bf16* dv, const cuda::GpuContext& ctx) override;
};

// The feed-forward seam, as LayerFeedForward on the CPU, on ctx's stream: its forward reads a.h2_local (gathered
// into a.h2 under sequence parallelism), writes this rank's partial sums of the branch output into y [T, C] and
// leaves their sum over the tensor-parallel group in out (this rank's rows; out may be y); its backward reads
// d(loss)/d(out) from dres [local rows, C] (not changing it), accumulates fp32 parameter gradients into g and leaves
// d(loss)/d(h2) of this rank's rows, summed over the group, in scratch.dh_local (the rest of scratch is free to use).
class GpuLayerFeedForward {
 public:
  virtual ~GpuLayerFeedForward() = default;
  virtual void forward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w, const GpuLayerBatch& b,
                       const GpuLayerActivations& a, const GpuLayerScratch& scratch,
                       LayerCollectives<bf16>* collectives, bf16* y, bf16* out, const cuda::GpuContext& ctx,
                       GpuOpProfiler* prof) = 0;
  virtual void backward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w,
                        const GpuLayerParams<float>& g, const GpuLayerBatch& b, const GpuLayerActivations& a,
                        const GpuLayerScratch& scratch, LayerCollectives<bf16>* collectives, bf16* dres,
                        const cuda::GpuContext& ctx, GpuOpProfiler* prof) = 0;
  // Gives back memory the feed-forward holds beyond the activations it is handed (the arenas' release).
  virtual void release(const cuda::GpuContext&) {}
};

// The dense SwiGLU MLP (gate/up column-parallel, down row-parallel), keeping a.gate, a.up and a.act.
class GpuDenseFeedForward final : public GpuLayerFeedForward {
 public:
  void forward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w, const GpuLayerBatch& b,
               const GpuLayerActivations& a, const GpuLayerScratch& scratch, LayerCollectives<bf16>* collectives,
               bf16* y, bf16* out, const cuda::GpuContext& ctx, GpuOpProfiler* prof) override;
  void backward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w, const GpuLayerParams<float>& g,
                const GpuLayerBatch& b, const GpuLayerActivations& a, const GpuLayerScratch& scratch,
                LayerCollectives<bf16>* collectives, bf16* dres, const cuda::GpuContext& ctx,
                GpuOpProfiler* prof) override;
};

template <typename E>
class ExpertDispatch;
// The feed-forward of c's layers (what a model's passes give the layer body): the dense MLP, or for a mixture of
// experts the GpuMoeFeedForward (model/gpu_moe_feed_forward.h) over `dispatch` (null: every expert here).
std::unique_ptr<GpuLayerFeedForward> make_gpu_layer_feed_forward(const ModelConfig& c,
                                                                 ExpertDispatch<bf16>* dispatch = nullptr);

// Computes layer `layer` on a.x_in and writes its output (the next residual stream) to x_out [T, C] (bf16; under
// sequence parallelism x_in and x_out hold this rank's local rows).
void gpu_layer_forward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w, const GpuLayerBatch& b,
                       const GpuLayerActivations& a, const GpuLayerScratch& scratch, GpuLayerAttention& attention,
                       GpuLayerFeedForward& feed_forward, LayerCollectives<bf16>* collectives, bf16* x_out,
                       const cuda::GpuContext& ctx, GpuOpProfiler* prof);
// dres [T, C] (bf16; [local rows, C] under sequence parallelism) holds d(loss)/d(x_out) on entry and
// d(loss)/d(x_in) on return; fp32 parameter gradients accumulate into g (the norm weights' partial under sequence
// parallelism). `attention` and `feed_forward` are the seams the forward ran.
void gpu_layer_backward(int layer, const LayerShape& s, const GpuLayerParams<const bf16>& w,
                        const GpuLayerParams<float>& g, const GpuLayerBatch& b, const GpuLayerActivations& a,
                        const GpuLayerScratch& scratch, GpuLayerAttention& attention,
                        GpuLayerFeedForward& feed_forward, LayerCollectives<bf16>* collectives, bf16* dres,
                        const cuda::GpuContext& ctx, GpuOpProfiler* prof);

}  // namespace hone

#endif  // HONE_CUDA
