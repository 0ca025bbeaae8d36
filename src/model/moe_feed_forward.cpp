// The mixture-of-experts feed-forward, once over the backend (what it computes: moe_feed_forward.h; where its data
// lives: backend/moe_memory.h).
#include "model/moe_feed_forward.h"

#include <algorithm>

#include "backend/moe_ops.h"
#include "runtime/error.h"

namespace hone {
namespace {

// Zeroes bytes of the backend's memory (nothing for none).
template <typename B>
void zero_bytes(const typename B::Exec& x, void* p, size_t bytes) {
  if (bytes > 0) B::zero(x, p, bytes);
}

}  // namespace

template <typename B>
std::unique_ptr<LayerFeedForward<B>> make_layer_feed_forward(const ModelConfig& c,
                                                             ExpertDispatch<typename B::Act>* dispatch) {
  if (c.is_moe()) return std::make_unique<MoeFeedForward<B>>(c, dispatch);
  return std::make_unique<DenseFeedForward<B>>();
}

namespace {

// The sparse layers of c (checking that it has experts).
int count_sparse_layers(const ModelConfig& c) {
  HONE_CHECK(c.is_moe(), "a mixture-of-experts feed-forward for a model without experts");
  int n = 0;
  for (int l = 0; l < c.num_hidden_layers; ++l) n += c.is_moe_layer(l) ? 1 : 0;
  return n;
}

}  // namespace

template <typename B>
MoeFeedForward<B>::MoeFeedForward(const ModelConfig& c, ExpertDispatch<A>* dispatch)
    : E_(c.num_experts),
      k_(c.num_experts_per_tok),
      dispatch_(dispatch),
      mem_(c.num_hidden_layers, count_sparse_layers(c), c.num_experts, dispatch != nullptr) {
  layer_sparse_.assign(size_t(c.num_hidden_layers), -1);
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (c.is_moe_layer(l)) layer_sparse_[size_t(l)] = sparse_layers_++;
  rows_.assign(size_t(c.num_hidden_layers), 0);
  topk_.assign(size_t(c.num_hidden_layers), nullptr);
  counted_.assign(size_t(sparse_layers_), 0);
}

template <typename B>
void MoeFeedForward<B>::forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b, const Acts& a,
                                const Scratch& scratch, LayerCollectives<A>* collectives, A* y, A* out,
                                const Exec& x) {
  if (!is_sparse(layer)) {
    dense_.forward(layer, s, w, b, a, scratch, collectives, y, out, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden;
  if (Tl != T) collectives->gather_sequence(a.h2_local, a.h2, int64_t(Tl) * C);
  sparse_forward(layer, s, w, b, a, scratch, y, x);
  // A generation idle pass has no rows (T = 0 on every rank of the tensor-parallel group alike): nothing to reduce.
  if (collectives && T > 0) collectives->reduce_row_parallel_output(y, out, int64_t(T) * C);
}

template <typename B>
void MoeFeedForward<B>::backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g,
                                 const LayerBatch& b, const Acts& a, const Scratch& scratch,
                                 LayerCollectives<A>* collectives, A* dres, const Exec& x) {
  if (!is_sparse(layer)) {
    dense_.backward(layer, s, w, g, b, a, scratch, collectives, dres, x);
    return;
  }
  const int T = b.T, Tl = collectives ? collectives->local_rows(T) : T;
  const int64_t C = s.hidden, TC = int64_t(T) * C, TlC = int64_t(Tl) * C;
  // The residual gradient of all T rows (the gradient of a reduce-scatter is an all-gather), and the normed rows
  // gathered again (the layers share one place for them).
  const A* dy = dres;
  if (Tl != T) {
    collectives->gather_sequence(dres, scratch.dy, TlC);
    dy = scratch.dy;
    collectives->gather_sequence(a.h2_local, a.h2, TlC);
  }
  zero_bytes<B>(x, scratch.dh, size_t(TC) * sizeof(A));
  sparse_backward(layer, s, w, g, b, a, scratch, dy, scratch.dh, x);
  if (collectives) collectives->reduce_column_parallel_input_grad(scratch.dh, scratch.dh_local, TC);
}

template <typename B>
void MoeFeedForward<B>::route(int layer, const LayerShape& s, const MoeRouting& r, const MoeSaved<A>& sv,
                              const MoeForwardScratch<A>& fs, const A* h, const A* w_router, int T, const Exec& x) {
  const int C = s.hidden, E = E_, k = k_, S = sparse_layers_, i = layer_sparse_[size_t(layer)];
  moe_router_forward(x, fs.logits, h, w_router, T, C, E);
  moe_topk_forward(x, sv.probs, sv.topk, sv.topk_w, fs.logits, T, E, k, s.norm_topk_prob);
  if (r.forced)
    moe_topk_replay(x, sv.topk, sv.topk_w, sv.probs, r.forced + int64_t(i) * k, int64_t(S) * k, T, E, k,
                    s.norm_topk_prob);
  if (r.record) moe_record_routing(x, r.record, sv.topk, T, S, i, k);
  moe_route(x, sv.offsets, sv.row_of, sv.token_of, sv.topk, T, k, E, fs.route, fs.route_bytes);
  // The load-balancing statistics over the counted rows.
  const int counted = counted_[size_t(i)];
  moe_expert_counts(x, mem_.counts() + int64_t(i) * E, sv.topk, counted, k, E);
  zero_bytes<B>(x, mem_.prob_sum() + int64_t(i) * E, size_t(E) * sizeof(float));
  moe_router_stats(x, mem_.prob_sum() + int64_t(i) * E, sv.probs, counted, E);
}

template <typename B>
void MoeFeedForward<B>::sparse_forward(int layer, const LayerShape& s, const W& w, const LayerBatch& b,
                                       const Acts& a, const Scratch& scratch, A* y, const Exec& x) {
  using Scope = typename B::Scope;
  const int T = b.T, C = s.hidden, E = E_, k = k_, Im = s.moe_intermediate, El = s.experts;
  const int64_t Nt = int64_t(T) * k;
  const MoeSaved<A> sv = mem_.saved(layer, s, T, a.ffn, /*forward=*/true);
  const MoeForwardScratch<A> fs = mem_.forward_scratch(s, T, scratch.ffn);
  rows_[size_t(layer)] = T;
  topk_[size_t(layer)] = sv.topk;
  counted_[size_t(layer_sparse_[size_t(layer)])] = b.counted_rows < 0 ? T : std::min(T, b.counted_rows);
  {
    Scope sc(x, "moe_router");
    route(layer, s, b.routing, sv, fs, a.h2, w.router, T, x);
  }
  // The expert side: this rank's rows (ep = 1: the permuted rows themselves), or what the group sends.
  MoeExperts<A> ex;
  if (dispatch_) {
    Scope sc(x, "moe_dispatch");
    const int64_t* counts = mem_.route_counts(sv.offsets, E, x);  // the counts cross the group before the rows
    const int64_t N = dispatch_->plan(layer, counts, mem_.expert_counts(El));
    ex = mem_.dispatched_experts(layer, s, N, x);
    B::moe_permute_forward(x, fs.xp, a.h2, sv.token_of, int(Nt), C);
    dispatch_->dispatch(layer, fs.xp, ex.xe, C);
  } else {
    Scope sc(x, "moe_permute");
    ex = mem_.local_experts(layer, s, sv, T);
    B::moe_permute_forward(x, ex.xe, a.h2, sv.token_of, int(Nt), C);
    mem_.local_offsets(layer, ex, sv.offsets, El, x);
  }
  {
    Scope sc(x, "moe_grouped_gemm");
    moe_expert_linear_forward(x, ex.gate, ex.xe, w.expert_gate, ex.offsets, El, C, Im, ex.N);
    moe_expert_linear_forward(x, ex.up, ex.xe, w.expert_up, ex.offsets, El, C, Im, ex.N);
  }
  {
    Scope sc(x, "swiglu");
    B::swiglu_forward(x, ex.act, ex.gate, ex.up, ex.N * Im);
  }
  {
    Scope sc(x, "moe_grouped_gemm");
    moe_expert_linear_forward(x, ex.ye, ex.act, w.expert_down, ex.offsets, El, Im, C, ex.N);
  }
  if (dispatch_) {
    Scope sc(x, "moe_combine");
    dispatch_->combine(layer, ex.ye, sv.yp, C);
  }
  {
    Scope sc(x, "moe_unpermute");
    moe_unpermute_forward(x, y, sv.yp, sv.row_of, sv.topk_w, T, k, C);
  }
}

template <typename B>
void MoeFeedForward<B>::sparse_backward(int layer, const LayerShape& s, const W& w, const LayerGradPtrs& g,
                                        const LayerBatch& b, const Acts& a, const Scratch& scratch, const A* dy,
                                        A* dh, const Exec& x) {
  using Scope = typename B::Scope;
  const int T = b.T, C = s.hidden, E = E_, k = k_, Im = s.moe_intermediate, El = s.experts;
  const int64_t Nt = int64_t(T) * k;
  const MoeSaved<A> sv = mem_.saved(layer, s, T, a.ffn, /*forward=*/false);
  const MoeBackwardScratch<A> bs = mem_.backward_scratch(s, T, scratch.ffn_backward);
  const MoeExperts<A> ex = mem_.experts(layer, s, sv, T);
  MoeExpertGrads<A> gx = mem_.expert_grads(layer, s, ex, bs, T, x);
  const int64_t N = ex.N;
  // Combine: d(yp) and d(topk_w).
  {
    Scope sc(x, "moe_unpermute_backward");
    zero_bytes<B>(x, bs.dyp, size_t(Nt) * C * sizeof(A));
    zero_bytes<B>(x, bs.dtopk_w, size_t(Nt) * sizeof(float));
    moe_unpermute_backward(x, bs.dyp, bs.dtopk_w, dy, sv.yp, sv.row_of, sv.topk_w, T, k, C);
  }
  // The experts, on the expert side (the gradient of a combine is a dispatch).
  if (dispatch_) {
    Scope sc(x, "moe_dispatch");
    dispatch_->dispatch(layer, bs.dyp, gx.dye, C);
  }
  {
    Scope sc(x, "moe_grouped_gemm_backward");
    zero_bytes<B>(x, gx.dact, size_t(N) * Im * sizeof(A));
    moe_expert_linear_backward(x, gx.dact, g.expert_down, gx.dye, ex.act, w.expert_down, ex.offsets, El, Im, C, N);
  }
  {
    Scope sc(x, "swiglu_backward");
    moe_swiglu_backward(x, gx.dgate, gx.dup, gx.dact, ex.gate, ex.up, N * Im);
  }
  {
    Scope sc(x, "moe_grouped_gemm_backward");
    zero_bytes<B>(x, gx.dxe, size_t(N) * C * sizeof(A));
    moe_expert_linear_backward(x, gx.dxe, g.expert_gate, gx.dgate, ex.xe, w.expert_gate, ex.offsets, El, C, Im, N);
    moe_expert_linear_backward(x, gx.dxe, g.expert_up, gx.dup, ex.xe, w.expert_up, ex.offsets, El, C, Im, N);
  }
  // Back to the token side (the gradient of a dispatch is a combine), then to the tokens' rows.
  const A* dxp = gx.dxe;
  if (dispatch_) {
    Scope sc(x, "moe_combine");
    dispatch_->combine(layer, gx.dxe, gx.dxp, C);
    dxp = gx.dxp;
    mem_.end_backward(layer, gx, x);
  }
  {
    Scope sc(x, "moe_permute_backward");
    moe_permute_backward(x, dh, dxp, sv.row_of, T, k, C);
  }
  // The router: through the routing weights, and the load-balancing loss through the probabilities.
  {
    Scope sc(x, "moe_router_backward");
    zero_bytes<B>(x, bs.dlogits, size_t(T) * E * sizeof(float));
    // The load-balancing loss's gradient on tensor-parallel rank 0 alone (the sums over tp then count it once).
    const float* daux = nullptr;
    const double aux_weight = b.routing.aux_loss_weight;
    if (aux_weight != 0 && s.tp_rank == 0) {
      double R = 0;
      for (int r : counted_) R += r;
      moe_aux_gradient(x, mem_.daux(), mem_.counts(), sparse_layers_, E, aux_weight, R);
      daux = mem_.daux();
    }
    // ... on the counted rows (padding rows are not in the loss).
    const int n = counted_[size_t(layer_sparse_[size_t(layer)])];
    moe_topk_backward(x, bs.dlogits, bs.dtopk_w, daux, sv.probs, sv.topk, sv.topk_w, n, E, k, s.norm_topk_prob);
    if (n < T)
      moe_topk_backward(x, bs.dlogits + int64_t(n) * E, bs.dtopk_w + int64_t(n) * k, nullptr,
                        sv.probs + int64_t(n) * E, sv.topk + int64_t(n) * k, sv.topk_w + int64_t(n) * k, T - n, E,
                        k, s.norm_topk_prob);
    moe_router_backward(x, dh, g.router, bs.dlogits, bs.dlogits_act, a.h2, w.router, T, C, E);
  }
}

template <typename B>
std::vector<int32_t> MoeFeedForward<B>::expert_counts(const Exec& x) const {
  std::vector<int32_t> c(size_t(sparse_layers_) * size_t(E_));
  B::download(x, c.data(), mem_.counts(), c.size() * sizeof(int32_t));
  B::sync(x);
  return c;
}

template <typename B>
double MoeFeedForward<B>::aux_loss(const Exec& x) const {
  const std::vector<int32_t> counts = expert_counts(x);
  std::vector<float> P(counts.size());
  B::download(x, P.data(), mem_.prob_sum(), P.size() * sizeof(float));
  B::sync(x);
  double R = 0;
  for (int r : counted_) R += r;
  if (R == 0) return 0;
  double aux = 0;
  for (int e = 0; e < E_; ++e) {
    double f = 0, p = 0;
    for (int i = 0; i < sparse_layers_; ++i) {
      f += counts[size_t(i) * E_ + size_t(e)];
      p += P[size_t(i) * E_ + size_t(e)];
    }
    aux += (f / R) * (p / R);
  }
  return aux * E_;
}

template <typename B>
std::vector<int32_t> MoeFeedForward<B>::topk(int layer, const Exec& x) const {
  std::vector<int32_t> t;
  if (!is_sparse(layer) || rows_[size_t(layer)] == 0) return t;
  t.resize(size_t(rows_[size_t(layer)]) * size_t(k_));
  B::download(x, t.data(), topk_[size_t(layer)], t.size() * sizeof(int32_t));
  B::sync(x);
  return t;
}

#define HONE_INSTANTIATE_MOE(B)                                                                                    \
  template class MoeFeedForward<B>;                                                                                \
  template std::unique_ptr<LayerFeedForward<B>> make_layer_feed_forward<B>(const ModelConfig&,                     \
                                                                           ExpertDispatch<B::Act>*);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_MOE)
#undef HONE_INSTANTIATE_MOE

}  // namespace hone
