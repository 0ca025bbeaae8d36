// The CPU mixture-of-experts feed-forward (what it computes: moe_feed_forward.h).
#include "model/moe_feed_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone {
namespace {

template <typename T>
void assign_zero(std::vector<T>& v, int64_t n) {
  v.assign(size_t(n), T(0));
}

}  // namespace

template <>
std::unique_ptr<LayerFeedForward<CpuBackend>> make_layer_feed_forward<CpuBackend>(const ModelConfig& c,
                                                                                  ExpertDispatch<float>* dispatch) {
  if (c.is_moe()) return std::make_unique<MoeFeedForward>(c, dispatch);
  return std::make_unique<DenseFeedForward<CpuBackend>>();
}

MoeFeedForward::MoeFeedForward(const ModelConfig& c, ExpertDispatch<float>* dispatch)
    : E_(c.num_experts), k_(c.num_experts_per_tok), dispatch_(dispatch) {
  HONE_CHECK(c.is_moe(), "a mixture-of-experts feed-forward for a model without experts");
  layer_sparse_.assign(size_t(c.num_hidden_layers), -1);
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) layer_sparse_[size_t(l)] = sparse_layers_++;
  layers_.resize(size_t(c.num_hidden_layers));
}

// Router, top-k (or the forced experts) and the routing plan of one sparse layer.
void MoeFeedForward::route(int layer, const LayerShape& s, LayerState& st, const float* h, const float* w_router) {
  const int T = st.T, C = s.hidden, E = E_, k = k_;
  st.logits.resize(size_t(T) * E);
  st.probs.resize(size_t(T) * E);
  st.topk_idx.resize(size_t(T) * k);
  st.topk_w.resize(size_t(T) * k);
  cpu::linear_forward(st.logits.data(), h, w_router, nullptr, T, C, E);
  cpu::moe_topk_forward(st.probs.data(), st.topk_idx.data(), st.topk_w.data(), st.logits.data(), T, E, k,
                        s.norm_topk_prob);
  if (forced_) {
    const int S = sparse_layers_, i = layer_sparse_[size_t(layer)];
    cpu::moe_topk_replay(st.topk_idx.data(), st.topk_w.data(), st.probs.data(), forced_ + int64_t(i) * k,
                         int64_t(S) * k, T, E, k, s.norm_topk_prob);
  }
  if (record_) {
    const int S = sparse_layers_, i = layer_sparse_[size_t(layer)];
    for (int t = 0; t < T; ++t)
      std::copy_n(st.topk_idx.data() + int64_t(t) * k, k, record_ + (int64_t(t) * S + i) * k);
  }
  st.offsets.resize(size_t(E) + 1);
  st.row_of.resize(size_t(T) * k);
  st.token_of.resize(size_t(T) * k);
  cpu::moe_route(st.offsets.data(), st.row_of.data(), st.token_of.data(), st.topk_idx.data(), T, k, E);
  // The load-balancing statistics over the counted rows; the exchange's counts over every routed row.
  st.counted = counted_rows_ < 0 ? T : std::min(T, counted_rows_);
  std::vector<int32_t> c(static_cast<size_t>(E));
  cpu::moe_expert_counts(c.data(), st.topk_idx.data(), st.counted, k, E);
  st.counts.assign(c.begin(), c.end());
  assign_zero(st.prob_sum, E);
  cpu::moe_router_stats(st.prob_sum.data(), st.probs.data(), st.counted, E);
  st.route_counts.resize(size_t(E));
  for (int e = 0; e < E; ++e) st.route_counts[size_t(e)] = st.offsets[size_t(e) + 1] - st.offsets[size_t(e)];
}

void MoeFeedForward::forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                             const Scratch& scratch, LayerCollectives<float>* collectives, float* y, float* out,
                             const Exec& x) {
  if (!is_sparse(layer)) {
    dense_.forward(layer, s, w, b, a, scratch, collectives, y, out, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden;
  if (Tl != T) collectives->gather_sequence(a.h2_local, a.h2, int64_t(Tl) * C);
  sparse_forward(layer, s, w, b, a, y);
  if (collectives) collectives->reduce_row_parallel_output(y, out, int64_t(T) * C);
}

void MoeFeedForward::backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g, const LayerBatch& b,
                              const Acts& a, const Scratch& scratch, LayerCollectives<float>* collectives, float* dres,
                              const Exec& x) {
  if (!is_sparse(layer)) {
    dense_.backward(layer, s, w, g, b, a, scratch, collectives, dres, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden, TC = int64_t(T) * C, TlC = int64_t(Tl) * C;
  // The residual gradient of all T rows (the gradient of a reduce-scatter is an all-gather), and the normed rows
  // gathered again (the layers share one place for them).
  const float* dy = dres;
  if (Tl != T) {
    collectives->gather_sequence(dres, scratch.dy, TlC);
    dy = scratch.dy;
    collectives->gather_sequence(a.h2_local, a.h2, TlC);
  }
  std::fill(scratch.dh, scratch.dh + TC, 0.f);
  sparse_backward(layer, s, w, g, b, a, dy, scratch.dh);
  if (collectives) collectives->reduce_column_parallel_input_grad(scratch.dh, scratch.dh_local, TC);
}

void MoeFeedForward::sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                                    float* y) {
  LayerState& st = layers_[size_t(layer)];
  st.T = b.T;
  const int T = b.T, C = s.hidden, k = k_, Im = s.moe_intermediate, El = s.experts;
  const int64_t Nt = int64_t(T) * k;
  route(layer, s, st, a.h2, w.router);

  // The rows of this rank's experts: all of them here, or what the expert-parallel group sends.
  st.expert_counts.resize(size_t(El));
  int64_t N = Nt;
  if (dispatch_) N = dispatch_->plan(layer, st.route_counts.data(), st.expert_counts.data());
  else std::copy(st.route_counts.begin(), st.route_counts.end(), st.expert_counts.begin());
  st.expert_offsets.assign(size_t(El) + 1, 0);
  for (int e = 0; e < El; ++e) st.expert_offsets[size_t(e) + 1] = st.expert_offsets[size_t(e)] + int32_t(st.expert_counts[size_t(e)]);
  HONE_CHECK(st.expert_offsets[size_t(El)] == N, "expert rows disagree with the plan");

  st.xe.resize(size_t(N) * C);
  if (dispatch_) {
    xp_.resize(size_t(Nt) * C);
    cpu::moe_permute_forward(xp_.data(), a.h2, st.token_of.data(), int(Nt), C);
    dispatch_->dispatch(layer, xp_.data(), st.xe.data(), C);
  } else {
    cpu::moe_permute_forward(st.xe.data(), a.h2, st.token_of.data(), int(Nt), C);
  }
  st.gate.resize(size_t(N) * Im);
  st.up.resize(size_t(N) * Im);
  st.act.resize(size_t(N) * Im);
  const int32_t* eo = st.expert_offsets.data();
  cpu::moe_grouped_linear_forward(st.gate.data(), st.xe.data(), w.expert_gate, eo, El, C, Im);
  cpu::moe_grouped_linear_forward(st.up.data(), st.xe.data(), w.expert_up, eo, El, C, Im);
  cpu::swiglu_forward(st.act.data(), st.gate.data(), st.up.data(), N * Im);
  st.yp.resize(size_t(Nt) * C);
  if (dispatch_) {
    ye_.resize(size_t(N) * C);
    cpu::moe_grouped_linear_forward(ye_.data(), st.act.data(), w.expert_down, eo, El, Im, C);
    dispatch_->combine(layer, ye_.data(), st.yp.data(), C);
  } else {
    cpu::moe_grouped_linear_forward(st.yp.data(), st.act.data(), w.expert_down, eo, El, Im, C);
  }
  cpu::moe_unpermute_forward(y, st.yp.data(), st.row_of.data(), st.topk_w.data(), T, k, C);
}

void MoeFeedForward::sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g,
                                     const LayerBatch& b, const Acts& a, const float* dy, float* dh) {
  const LayerState& st = layers_[size_t(layer)];
  const int T = b.T, C = s.hidden, E = E_, k = k_, Im = s.moe_intermediate, El = s.experts;
  HONE_CHECK(st.T == T, "backward of layer ", layer, " over ", T, " rows after a forward of ", st.T);
  const int64_t Nt = int64_t(T) * k, N = st.expert_offsets[size_t(El)];
  const int32_t* eo = st.expert_offsets.data();

  // Combine: d(yp) and d(topk_w).
  assign_zero(dyp_, Nt * C);
  assign_zero(dtopk_w_, Nt);
  cpu::moe_unpermute_backward(dyp_.data(), dtopk_w_.data(), dy, st.yp.data(), st.row_of.data(), st.topk_w.data(), T,
                              k, C);
  // The experts, on the expert side (the gradient of a combine is a dispatch).
  const float* dye = dyp_.data();
  if (dispatch_) {
    dye_.resize(size_t(N) * C);
    dispatch_->dispatch(layer, dyp_.data(), dye_.data(), C);
    dye = dye_.data();
  }
  assign_zero(dact_, N * Im);
  cpu::moe_grouped_linear_backward(dact_.data(), g.expert_down, dye, st.act.data(), w.expert_down, eo, El,
                                   Im, C);
  assign_zero(dgate_, N * Im);
  assign_zero(dup_, N * Im);
  cpu::swiglu_backward(dgate_.data(), dup_.data(), dact_.data(), st.gate.data(), st.up.data(), N * Im, true);
  assign_zero(dxe_, N * C);
  cpu::moe_grouped_linear_backward(dxe_.data(), g.expert_gate, dgate_.data(), st.xe.data(), w.expert_gate,
                                   eo, El, C, Im);
  cpu::moe_grouped_linear_backward(dxe_.data(), g.expert_up, dup_.data(), st.xe.data(), w.expert_up, eo,
                                   El, C, Im);
  // Back to the token side (the gradient of a dispatch is a combine), then to the tokens' rows.
  const float* dxp = dxe_.data();
  if (dispatch_) {
    dxp_.resize(size_t(Nt) * C);
    dispatch_->combine(layer, dxe_.data(), dxp_.data(), C);
    dxp = dxp_.data();
  }
  cpu::moe_permute_backward(dh, dxp, st.row_of.data(), T, k, C);

  // The router: through the routing weights, and the load-balancing loss through the probabilities.
  assign_zero(dlogits_, int64_t(T) * E);
  // The load-balancing loss's gradient reaches the counted rows only (padding rows are not in the loss).
  std::vector<float> daux;
  if (aux_weight_ != 0 && s.tp_rank == 0) daux = aux_gradient();
  const int n = st.counted;
  cpu::moe_topk_backward(dlogits_.data(), dtopk_w_.data(), daux.empty() ? nullptr : daux.data(), st.probs.data(),
                         st.topk_idx.data(), st.topk_w.data(), n, E, k, s.norm_topk_prob);
  if (n < T)
    cpu::moe_topk_backward(dlogits_.data() + int64_t(n) * E, dtopk_w_.data() + int64_t(n) * k, nullptr,
                           st.probs.data() + int64_t(n) * E, st.topk_idx.data() + int64_t(n) * k,
                           st.topk_w.data() + int64_t(n) * k, T - n, E, k, s.norm_topk_prob);
  cpu::linear_backward(dh, g.router, nullptr, dlogits_.data(), a.h2, w.router, T, C, E, true);
}

double MoeFeedForward::aux_loss() const {
  std::vector<double> f(size_t(E_), 0.0), P(size_t(E_), 0.0);
  double R = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layer_sparse_[l] < 0 || layers_[l].T == 0) continue;
    R += layers_[l].counted;
    for (int e = 0; e < E_; ++e) f[size_t(e)] += double(layers_[l].counts[size_t(e)]), P[size_t(e)] += layers_[l].prob_sum[size_t(e)];
  }
  if (R == 0) return 0;
  double aux = 0;
  for (int e = 0; e < E_; ++e) aux += (f[size_t(e)] / R) * (P[size_t(e)] / R);
  return aux * E_;
}

std::vector<float> MoeFeedForward::aux_gradient() const {
  std::vector<double> f(size_t(E_), 0.0);
  double R = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    if (layer_sparse_[l] < 0 || layers_[l].T == 0) continue;
    R += layers_[l].counted;
    for (int e = 0; e < E_; ++e) f[size_t(e)] += double(layers_[l].counts[size_t(e)]);
  }
  std::vector<float> g(size_t(E_), 0.f);
  if (R == 0) return g;
  for (int e = 0; e < E_; ++e) g[size_t(e)] = float(aux_weight_ * E_ * f[size_t(e)] / (R * R));
  return g;
}

}  // namespace hone
