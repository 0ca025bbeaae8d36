// The mixture-of-experts feed-forward of Qwen3-MoE (Qwen3MoeSparseMoeBlock), the layer body's feed-forward seam
// (model/transformer_layer.h) on the CPU in fp32; a model's dense layers (mlp_only_layers, decoder_sparse_step)
// run DenseFeedForward. Dropless: every token reaches its k experts, however uneven the load.
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
// Under tensor parallelism every rank routes the same whole rows the same way and computes its slice of each
// expert's width: y is a partial sum like a dense MLP's output, and the routing weights' gradient (through yp) is
// partial too, so the router's weight gradient is summed over tp with the other partial gradients. Under expert
// parallelism the rows cross ranks at dispatch and combine (model/expert_dispatch.h, parallel/expert_parallel.h).
//
// The load-balancing loss, as transformers' load_balancing_loss_func computes it over the sparse layers of one
// forward: with R the rows of all sparse layers together, f_e = (top-k assignments to expert e) / R and
// P_e = (sum of probs[., e]) / R, aux = E sum_e f_e P_e. Its gradient flows through P only:
// d aux / d probs[t, e] = E f_e / R in every sparse layer. backward adds aux_loss_weight() times it (on tensor-
// parallel rank 0 alone: the partial sums over tp then hold it once).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu_backend.h"
#include "model/expert_dispatch.h"
#include "model/model_config.h"
#include "model/transformer_layer.h"

namespace hone {

// The CPU feed-forward keeps its routing in its own per-layer state: nothing carved by the layer body.
inline FeedForwardBytes moe_feed_forward_bytes(CpuBackend, const LayerShape&, int) { return {}; }
// The CPU backend's feed-forward of c's layers: DenseFeedForward, or MoeFeedForward for a mixture of experts.
template <>
std::unique_ptr<LayerFeedForward<CpuBackend>> make_layer_feed_forward<CpuBackend>(const ModelConfig& c,
                                                                                  ExpertDispatch<float>* dispatch);

class MoeFeedForward final : public LayerFeedForward<CpuBackend> {
 public:
  using W = LayerWeightPtrs<CpuBackend>;
  using Acts = LayerActivations<CpuBackend>;
  using Scratch = LayerScratch<CpuBackend>;
  using Exec = CpuBackend::Exec;
  // dispatch: the expert-parallel exchange (null: this rank holds every expert); it must outlive this object.
  explicit MoeFeedForward(const ModelConfig& c, ExpertDispatch<float>* dispatch = nullptr);

  // The seam (model/transformer_layer.h): a sparse layer gathers the normed rows of every rank under sequence
  // parallelism, routes and computes all T rows (this rank's slice of each expert's width under tensor parallelism),
  // and reduces the partial output over the tensor-parallel group as a row-parallel output.
  void forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a, const Scratch& scratch,
               LayerCollectives<float>* collectives, float* y, float* out, const Exec& x) override;
  void backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b, const Acts& a,
                const Scratch& scratch, LayerCollectives<float>* collectives, float* dres, const Exec& x) override;

  // Rows past the first n of the next forwards' batches are padding (sequence parallelism pads a batch to a multiple
  // of tp): routed like any row, but left out of the load-balancing loss and the expert loads. -1: every row counts.
  void set_counted_rows(int n) { counted_rows_ = n; }

  // The load-balancing loss of the last forward (0 before any), and the weight of it in the loss whose gradient
  // the next backwards compute (0: no aux gradient).
  double aux_loss() const;
  void set_aux_loss_weight(double w) { aux_weight_ = w; }
  double aux_loss_weight() const { return aux_weight_; }

  // Routing replay: with forced set, the next forwards take each row's experts from forced (sparse layer i of
  // layer order, row t: forced[(t * sparse_layers + i) * k + j], for the rows of the batch) instead of the top-k;
  // the weights are still the probabilities (renormalized as configured) of the current router at those experts.
  // Rows that carry -1 keep their own top-k. The pointer must hold T sparse_layers k entries of each forward.
  void set_forced_routing(const int32_t* forced) { forced_ = forced; }
  // Routing record: with record set ([T, sparse layers, k] of the next forwards' rows), every sparse layer's forward
  // writes the k experts of each row there (generation records its routing so).
  void set_routing_record(int32_t* record) { record_ = record; }

  // What the last forward routed, layer by layer (sparse layers only; empty for dense ones): the experts of each
  // row [T, k] and the counted rows' assignments to each expert [E].
  int num_sparse_layers() const { return sparse_layers_; }
  bool is_sparse(int layer) const { return layer_sparse_[size_t(layer)] >= 0; }
  int sparse_index(int layer) const { return layer_sparse_[size_t(layer)]; }  // -1 for a dense layer
  int rows(int layer) const { return layers_[size_t(layer)].T; }
  const std::vector<int32_t>& topk(int layer) const { return layers_[size_t(layer)].topk_idx; }
  const std::vector<int64_t>& expert_counts(int layer) const { return layers_[size_t(layer)].counts; }

 private:
  // What a sparse layer's forward keeps for its backward (and its routing, for metrics).
  struct LayerState {
    int T = 0, counted = 0;  // rows, and those in the load-balancing statistics
    std::vector<float> logits, probs, topk_w, prob_sum;
    std::vector<int32_t> topk_idx, offsets, row_of, token_of, expert_offsets;
    std::vector<int64_t> counts, route_counts, expert_counts;  // counted rows' loads; all routed rows per expert
    std::vector<float> xe, gate, up, act, yp;  // expert side inputs and activations, token side outputs
  };
  // A sparse layer over all T rows: y [T, C] this rank's partial output; the backward adds d(loss)/d(h2) into dh.
  void sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a, float* y);
  void sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b,
                       const Acts& a, const float* dy, float* dh);
  void route(int layer, const LayerShape& s, LayerState& st, const float* h, const float* w_router);
  std::vector<float> aux_gradient() const;  // [E]: d aux / d probs[t, e], the same for every row

  int E_ = 0, k_ = 0;
  ExpertDispatch<float>* dispatch_ = nullptr;
  DenseFeedForward<CpuBackend> dense_;
  std::vector<int> layer_sparse_;  // per layer: its index among the sparse layers, or -1
  int sparse_layers_ = 0;
  std::vector<LayerState> layers_;
  double aux_weight_ = 0;
  const int32_t* forced_ = nullptr;
  int32_t* record_ = nullptr;
  int counted_rows_ = -1;
  // Scratch of one layer pass (not kept between layers).
  std::vector<float> xp_, ye_, dyp_, dye_, dact_, dgate_, dup_, dxe_, dxp_, dtopk_w_, dlogits_;
};

}  // namespace hone
