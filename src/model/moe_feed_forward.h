// The mixture-of-experts feed-forward of Qwen3-MoE (Qwen3MoeSparseMoeBlock), the layer body's feed-forward seam
// (model/transformer_layer.h), written once over a backend B (backend/backend.h): MoeFeedForward<CpuBackend> in
// fp32 on the host, MoeFeedForward<CudaBackend> with bf16 rows and weights and an fp32 router on a GPU stream. A
// model's dense layers (mlp_only_layers, decoder_sparse_step) run DenseFeedForward. Dropless: every token reaches
// its k experts, however uneven the load.
//
//   logits = h2 W_router^T                        [T, E]   (fp32)
//   probs = softmax(logits); topk_idx, topk_w = the k largest probs (renormalized when norm_topk_prob)
//   plan: the T k assignments sorted by expert    (offsets, row_of, token_of: src/ops/ops.h)
//   xp = permute(h2)                              [T k, C] token side
//   xe = dispatch(xp)                             [N, C]   the rows of this rank's experts (xp itself at ep = 1)
//   ye = down_e(silu(gate_e(xe)) * up_e(xe))      [N, C]   grouped by expert
//   yp = combine(ye)                              [T k, C]
//   y[t] = sum_j topk_w[t, j] yp[row_of[t k + j]]
//
// Each step is a backend op (backend/moe_ops.h: the CPU's reference ops, the GPU's kernels, cuBLAS per expert or
// the one-launch kernel); where the saved routing and the expert-side rows live is the backend's memory policy
// (backend/moe_memory.h: host vectors on the CPU; on the GPU carved with the layer's activations, pool memory under
// expert parallelism).
//
// Under tensor parallelism every rank routes the same whole rows the same way and computes its slice of each
// expert's width: y is a partial sum like a dense MLP's output, and the routing weights' gradient (through yp) is
// partial too, so the router's weight gradient is summed over tp with the other partial gradients. Under expert
// parallelism the rows cross ranks at dispatch and combine (model/expert_dispatch.h, parallel/expert_parallel.h).
//
// The load-balancing loss, as transformers' load_balancing_loss_func computes it over the sparse layers of one
// forward: with R the rows of all sparse layers together, f_e = (top-k assignments to expert e) / R and
// P_e = (sum of probs[., e]) / R, aux = E sum_e f_e P_e. Its gradient flows through P only:
// d aux / d probs[t, e] = E f_e / R in every sparse layer. backward adds the pass's weight times it
// (LayerBatch::routing.aux_loss_weight; on tensor-parallel rank 0 alone: the partial sums over tp then hold it once).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/expert_dispatch.h"
#include "model/model_config.h"
#include "backend/moe_memory.h"
#include "model/transformer_layer.h"

namespace hone {

// Bytes of a sparse layer's saved region for T rows and of the forward and backward scratch its passes use (shared
// by the layers), as the layer body carves them (model/transformer_layer.h): zero on the CPU, whose feed-forward
// keeps its own state.
template <typename B>
FeedForwardBytes moe_feed_forward_bytes(B, const LayerShape& s, int T) {
  return MoeMemory<B>::bytes(s, T);
}

template <typename B>
class MoeFeedForward final : public LayerFeedForward<B> {
 public:
  using A = typename B::Act;
  using W = LayerWeightPtrs<B>;
  using Acts = LayerActivations<B>;
  using Scratch = LayerScratch<B>;
  using Exec = typename B::Exec;
  // dispatch: the expert-parallel exchange (null: this rank holds every expert); it must outlive this object.
  explicit MoeFeedForward(const ModelConfig& c, ExpertDispatch<A>* dispatch = nullptr);

  // The seam (model/transformer_layer.h): a sparse layer gathers the normed rows of every rank under sequence
  // parallelism, routes and computes all T rows (this rank's slice of each expert's width under tensor parallelism),
  // and reduces the partial output over the tensor-parallel group as a row-parallel output.
  void forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a, const Scratch& scratch,
               LayerCollectives<A>* collectives, A* y, A* out, const Exec& x) override;
  void backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b, const Acts& a,
                const Scratch& scratch, LayerCollectives<A>* collectives, A* dres, const Exec& x) override;

  // The pass's routing (replay, record, the load-balancing loss's weight) and its counted rows come with its batch
  // (LayerBatch::routing, LayerBatch::counted_rows).

  // What the last forward routed, on the host (on the GPU these wait for the stream): the load-balancing loss (0
  // before any forward), and the counted rows' assignments to each expert per sparse layer [sparse layers x E].
  double aux_loss(const Exec& x) const;
  std::vector<int32_t> expert_counts(const Exec& x) const;
  int num_sparse_layers() const { return sparse_layers_; }
  bool is_sparse(int layer) const { return layer_sparse_[size_t(layer)] >= 0; }
  int sparse_index(int layer) const { return layer_sparse_[size_t(layer)]; }  // -1 for a dense layer
  // Layer by layer (empty for dense ones): the rows of its last forward and their experts [rows, k]. The experts are
  // read from the layer's saved routing: on the GPU, only while the forward's activations live (a training forward
  // whose layer is not recomputed).
  int rows(int layer) const { return rows_[size_t(layer)]; }
  std::vector<int32_t> topk(int layer, const Exec& x) const;

  // Gives back the memory held beyond the activations (the GPU's expert-side rows under expert parallelism).
  void release(const Exec& x) override { mem_.release(x); }

 private:
  // A sparse layer over all T rows: y [T, C] this rank's partial output; the backward adds d(loss)/d(h2) into dh.
  void sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                      const Scratch& scratch, A* y, const Exec& x);
  void sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b,
                       const Acts& a, const Scratch& scratch, const A* dy, A* dh, const Exec& x);
  // Router, top-k (or the forced experts), the routing record, the plan and the load-balancing statistics.
  void route(int layer, const LayerShape& s, const MoeRouting& r, const MoeSaved<A>& sv,
             const MoeForwardScratch<A>& fs, const A* h, const A* w_router, int T, const Exec& x);

  int E_ = 0, k_ = 0;
  ExpertDispatch<A>* dispatch_ = nullptr;
  DenseFeedForward<B> dense_;
  std::vector<int> layer_sparse_;  // per layer: its index among the sparse layers, or -1
  int sparse_layers_ = 0;
  std::vector<int> rows_;              // per layer: the rows of its last forward
  std::vector<const int32_t*> topk_;   // per layer: where its last forward saved their experts
  std::vector<int> counted_;           // per sparse layer: the rows in its load-balancing statistics
  MoeMemory<B> mem_;
};

}  // namespace hone
