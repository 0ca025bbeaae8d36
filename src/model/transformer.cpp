// TransformerModel<B>: the layers strung together over the backend, the final norm and the fused LM head, and the
// activation arenas (forward: saved activations; backward: gradient scratch), carved by one function that also
// counts them. Instantiated for every backend (backend/backend.h).
#include "model/transformer.h"

#include <algorithm>

#include "backend/carver.h"
#include "model/layer_recompute.h"
#include "model/moe_feed_forward.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/ring_attention.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {

template <typename B>
size_t carve_forward(ForwardRegions<B>& r, char* base, const ModelConfig& c, const LayerShape& s,
                     const ForwardPlan& p) {
  using A = typename B::Act;
  Carver k{base, B::kAlignment};
  const int64_t C = c.hidden_size, L = c.num_hidden_layers, T = p.T, Tl = p.local_rows;
  r.tokens = k.take<int32_t>(T);
  r.positions = k.take<int32_t>(T);
  r.targets = k.take<int32_t>(T);
  r.cu_seqlens = k.take<int32_t>(p.S + 1);
  const int b = p.span.layer_begin, e = p.span.layer_end;
  r.x.assign(size_t(L + 1), nullptr);  // the span's streams only: its input, then each of its layers' outputs
  for (int l = b; l <= e; ++l) r.x[size_t(l)] = k.take<A>(Tl * C);
  r.saved.assign(size_t(L), LayerActivations<B>{});
  LayerActivations<B> probe;
  const size_t per_layer = carve_layer_activations(probe, nullptr, s, int(T), int(Tl));
  // A selective layer keeps its GEMM and attention outputs and recomputes the rest into the shared scratch, which
  // fully recomputed layers (and every layer of a pass without backward) run in.
  bool any_shared = false, any_selective = false;
  for (int l = b; l < e; ++l) {
    any_shared = any_shared || p.kept[size_t(l)] != Recompute::none;
    any_selective = any_selective || p.kept[size_t(l)] == Recompute::selective;
  }
  // The selective rerun works on whole token rows; read_grpo_settings refuses it with sequence parallelism.
  HONE_CHECK(!base || !any_selective || Tl == T, "selective recompute under sequence parallelism");
  LayerActivations<B> scratch;
  if (any_shared) carve_layer_activations(scratch, k.take_bytes(per_layer), s, int(T), int(Tl));
  const size_t selective = carve_selective_activations(probe, nullptr, scratch, s, int(T), int(Tl));
  for (int l = b; l < e; ++l) {
    LayerActivations<B>& a = r.saved[size_t(l)];
    switch (p.kept[size_t(l)]) {
      case Recompute::none: carve_layer_activations(a, k.take_bytes(per_layer), s, int(T), int(Tl)); break;
      case Recompute::selective:
        carve_selective_activations(a, k.take_bytes(selective), scratch, s, int(T), int(Tl));
        break;
      case Recompute::full: a = scratch; break;
    }
  }
  if (Tl != T) {  // sequence parallelism: every layer's gathered rows in one shared place
    LayerActivations<B> gathered;
    carve_gathered_rows(gathered, k.take_bytes(carve_gathered_rows(gathered, nullptr, s, int(T))), s, int(T));
    for (int l = b; l < e; ++l) r.saved[size_t(l)].h1 = gathered.h1, r.saved[size_t(l)].h2 = gathered.h2;
  }
  r.fscratch = LayerScratch<B>{};
  const size_t fs = carve_layer_forward_scratch(r.fscratch, nullptr, s, int(T), int(Tl));
  carve_layer_forward_scratch(r.fscratch, k.take_bytes(fs), s, int(T), int(Tl));
  r.logprob_all = r.entropy_all = r.dlogprob_local = r.dentropy_local = nullptr;
  r.kept_logits = nullptr;
  r.rstd_f = r.lse_f = r.logprob = r.entropy = nullptr;
  r.h_f = r.h_f_local = nullptr;
  if (!p.span.head) return k.used;
  r.rstd_f = k.take<float>(Tl);
  r.h_f = k.take<A>(T * C);
  r.h_f_local = Tl != T ? k.take<A>(Tl * C) : r.h_f;
  r.lse_f = k.take<float>(T);
  if (p.keep_logits) r.kept_logits = k.take_bytes(B::lm_head_saved_bytes(int(T), c.vocab_size, p.chunk_v));
  r.logprob = k.take<float>(T);
  r.entropy = k.take<float>(T);
  if (p.context_parallel) {
    r.logprob_all = k.take<float>(p.caller_rows);
    r.entropy_all = k.take<float>(p.caller_rows);
    r.dlogprob_local = k.take<float>(T);
    r.dentropy_local = k.take<float>(T);
  }
  return k.used;
}

template <typename B>
size_t backward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows) {
  Carver k{nullptr, B::kAlignment};
  const int64_t TlC = int64_t(local_rows) * c.hidden_size;
  k.take<typename B::Act>(TlC);  // dres
  k.take<typename B::Act>(TlC);  // dh final
  if (local_rows != T) k.take<float>(2 * int64_t(T));  // padded token gradients
  LayerScratch<B> g;
  k.take_bytes(carve_layer_backward_scratch(g, nullptr, s, T, local_rows));
  return k.used;
}

template <typename B>
TransformerModel<B>::TransformerModel(const ModelConfig& config, const ParamLayout& layout, Exec exec, int max_tokens,
                                      TensorParallel* tp, ModelSpan span, A* shared_weights, ContextParallel* cp,
                                      ExpertParallel* ep)
    : c_(config),
      tp_(tp),
      cp_(cp),
      ring_(cp ? std::make_unique<RingAttention<B>>(*cp, exec) : nullptr),
      shape_(tp ? tp->shape() : ep ? ep->shape() : layer_shape(config)),
      layout_(layout),
      exec_(exec),
      span_(span.resolved(config.num_hidden_layers)),
      recompute_(size_t(config.num_hidden_layers), Recompute::none),
      feed_forward_(make_layer_feed_forward<B>(config, ep)),
      inv_freq_(config.head_dim / 2) {
  HONE_CHECK(int(layout_.layers.size()) == c_.num_hidden_layers, "layout has ", layout_.layers.size(),
             " layers, config ", c_.num_hidden_layers);
  const int64_t expect = tp   ? tp->layout().num_local_params()
                         : ep ? ep->layout().num_local_params()
                              : c_.num_parameters();
  HONE_CHECK(!span_.whole(c_.num_hidden_layers) || layout_.num_params == expect, "layout has ", layout_.num_params,
             " parameters, ", tp ? "this rank's shard " : "the config ", expect);
  HONE_CHECK(span_.layer_begin >= 0 && span_.layer_begin <= span_.layer_end &&
                 span_.layer_end <= c_.num_hidden_layers && (!span_.embedding || span_.layer_begin == 0) &&
                 (!span_.head || span_.layer_end == c_.num_hidden_layers),
             "a span of layers [", span_.layer_begin, ", ", span_.layer_end, ") of ", c_.num_hidden_layers,
             span_.embedding ? " with the embedding" : "", span_.head ? " with the head" : "");
  for (int l = span_.layer_begin; l < span_.layer_end; ++l)
    HONE_CHECK(layout_.layers[size_t(l)][LayerParam::q_proj] >= 0, "the weights lack layer ", l, " of the span");
  HONE_CHECK(!span_.embedding || layout_.embed_tokens >= 0, "the weights lack the embedding of the span");
  HONE_CHECK(!span_.head || (layout_.norm >= 0 && layout_.lm_head >= 0), "the weights lack the head of the span");
  HONE_CHECK(!cp_ || (span_.embedding && span_.head), "context parallelism runs the whole model, not a span");
  if (shared_weights) {
    w_ = shared_weights;
  } else {
    weights_ = typename B::template Array<A>(layout.num_params, "compute weights");
    w_ = weights_.get();
  }
  HONE_CHECK(c_.rope.head_dim == c_.head_dim, "rope.head_dim ", c_.rope.head_dim, " != head_dim ", c_.head_dim);
  HONE_CHECK(max_tokens > 0, "max_tokens must be positive");
  std::vector<float> inv(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv.data(), c_.rope);
  B::upload(exec_, inv_freq_.get(), inv.data(), inv.size() * sizeof(float));
  B::sync(exec_);
  arena_tokens_ = local_tokens(max_tokens);  // the first forward allocates the arenas, for what it needs
}

template <typename B>
TransformerModel<B>::TransformerModel(const ModelConfig& config, const ModelWeights& weights, TensorParallel* tp,
                                      ModelSpan span, ContextParallel* cp, ExpertParallel* ep)
  requires std::is_same_v<B, CpuBackend>
    // The model reads the weights; only upload_weights would write them, and nothing calls it on shared ones.
    : TransformerModel(config, param_layout_of(weights), Exec{}, 1, tp, span,
                       const_cast<float*>(weights.flat.defined() ? weights.flat.f32() : nullptr), cp, ep) {}

template <typename B>
TransformerModel<B>::~TransformerModel() = default;

template <typename B>
int TransformerModel<B>::local_tokens(int tokens) const {
  if (!cp_) return tokens;
  const int C = cp_->size();
  return 2 * ((tokens + 2 * C - 1) / (2 * C));
}

template <typename B>
LayerAttention<B>& TransformerModel<B>::attention() {
  return ring_ ? static_cast<LayerAttention<B>&>(*ring_) : attention_;
}

template <typename B>
LayerFeedForward<B>& TransformerModel<B>::feed_forward() {
  return *feed_forward_;
}

template <typename B>
MoeFeedForward<B>* TransformerModel<B>::moe() const {
  return dynamic_cast<MoeFeedForward<B>*>(feed_forward_.get());
}

template <typename B>
void TransformerModel<B>::set_profiler(GpuOpProfiler* p) {
  if constexpr (requires(Exec e) { e.prof; }) exec_.prof = p;
  else (void)p;
}

template <typename B>
void TransformerModel<B>::set_shared_weights(A* w) {
  HONE_CHECK(!weights_.get() && w, "only a model built on shared weights follows them to a new place");
  w_ = w;
}

template <typename B>
const typename B::Act* TransformerModel<B>::output() const {
  HONE_CHECK(!span_.head && have_output_, "output() is the hidden state a span without the head hands on");
  return f_.x[size_t(span_.layer_end)];
}

template <typename B>
const typename B::Act* TransformerModel<B>::input_grad() const {
  HONE_CHECK(!span_.embedding && dres_, "input_grad() is what a span without the embedding hands back");
  return dres_;
}

template <typename B>
void TransformerModel<B>::upload_weights(const ModelWeights& w) {
  HONE_CHECK(w.flat.numel() == layout_.num_params, "weights have ", w.flat.numel(), " parameters, the model ",
             layout_.num_params);
  B::upload_weights(exec_, w_, w.flat.f32(), layout_.num_params);
}

template <typename B>
void TransformerModel<B>::set_recompute(Recompute r) {
  recompute_.assign(recompute_.size(), r);
  arenas_stale_ = true;  // the layout changed: re-size on the next forward, which also lays the saved data out
  backward_ready_ = false;
}

template <typename B>
void TransformerModel<B>::set_layer_recompute(int layer, Recompute r) {
  HONE_CHECK(layer >= 0 && layer < int(recompute_.size()), "layer ", layer, " out of range");
  recompute_[size_t(layer)] = r;
  arenas_stale_ = true;
  backward_ready_ = false;
}

template <typename B>
bool TransformerModel<B>::keeps_logits(bool for_backward) const {
  return for_backward && keep_logits_ && span_.head && !tp_ &&
         std::all_of(recompute_.begin(), recompute_.end(), [](Recompute r) { return r == Recompute::none; });
}

template <typename B>
int TransformerModel<B>::padded_tokens(int T) const {
  if (!tp_ || !tp_->sequence_parallel()) return T;
  return (T + tp_->size() - 1) / tp_->size() * tp_->size();
}

template <typename B>
int TransformerModel<B>::local_rows(int T) const {
  return tp_ ? tp_->local_rows(T) : T;
}

template <typename B>
int TransformerModel<B>::split_multiple() const {
  return tp_ && tp_->sequence_parallel() ? tp_->size() : 1;
}

template <typename B>
int TransformerModel<B>::boundary_rows(const TensorParallel* tp, int T) {
  if (!tp) return T;
  const int Tp = tp->sequence_parallel() ? (T + tp->size() - 1) / tp->size() * tp->size() : T;
  return tp->local_rows(Tp);
}

template <typename B>
LayerCollectives<typename B::Act>* TransformerModel<B>::layers() const {
  return tp_ ? tp_->layers() : nullptr;
}

// Sequence parallelism splits the tokens in tp equal parts: a batch that tp does not divide gets a padding sequence
// (token 0, no targets) that nothing reads back.
template <typename B>
void TransformerModel<B>::pad_for_sequence_parallelism() {
  const int T = batch_.num_tokens(), pad = padded_tokens(T) - T;
  for (int i = 0; i < pad; ++i) {
    batch_.tokens.push_back(0);
    batch_.positions.push_back(i);
    batch_.targets.push_back(-1);
  }
  if (pad > 0) batch_.cu_seqlens.push_back(T + pad);
}

template <typename B>
ForwardPlan TransformerModel<B>::plan(int T, int S, int caller_rows, bool for_backward) const {
  ForwardPlan p;
  p.T = T;
  p.S = S;
  p.local_rows = local_rows(T);
  p.caller_rows = caller_rows;
  p.span = span_;
  // Without a backward to follow, no layer keeps its activations: all share the one scratch.
  p.kept = for_backward ? recompute_ : std::vector<Recompute>(recompute_.size(), Recompute::full);
  p.keep_logits = keeps_logits(for_backward);
  p.context_parallel = cp_ != nullptr;
  p.chunk_v = chunk_v_;
  return p;
}

template <typename B>
size_t TransformerModel<B>::forward_bytes(int T, bool for_backward) const {
  const int Tp = padded_tokens(T);
  ForwardRegions<B> r;
  // The caller's rows of a batch whose split gives T rows here: at most cp x T.
  return carve_forward<B>(r, nullptr, c_, shape_, plan(Tp, Tp, cp_ ? T * cp_->size() : T, for_backward));
}

template <typename B>
size_t TransformerModel<B>::backward_bytes(int T) const {
  const int Tp = padded_tokens(T);
  return hone::backward_bytes<B>(c_, shape_, Tp, local_rows(Tp));
}

template <typename B>
size_t TransformerModel<B>::training_bytes(int T, Recompute r) const {
  TransformerModel& self = const_cast<TransformerModel&>(*this);
  const std::vector<Recompute> keep = recompute_;
  self.recompute_.assign(keep.size(), r);
  const size_t n = forward_bytes(T, true) + backward_bytes(T);
  self.recompute_ = keep;
  return n + (cp_ ? RingAttention<B>::scratch_bytes(shape_, T) : 0);
}

template <typename B>
size_t TransformerModel<B>::planned_forward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows,
                                                  Recompute r, bool for_backward) {
  ForwardPlan p;
  p.T = p.S = p.caller_rows = T;
  p.local_rows = local_rows;
  p.span = ModelSpan{}.resolved(c.num_hidden_layers);
  p.kept.assign(size_t(c.num_hidden_layers), for_backward ? r : Recompute::full);
  p.keep_logits = for_backward && B::kKeepLogits && r == Recompute::none && local_rows == T;
  ForwardRegions<B> regions;
  return carve_forward<B>(regions, nullptr, c, s, p);
}

template <typename B>
size_t TransformerModel<B>::planned_backward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows) {
  return hone::backward_bytes<B>(c, s, T, local_rows);
}

template <typename B>
size_t TransformerModel<B>::layer_activation_bytes(const LayerShape& s, int T) {
  LayerActivations<B> a;
  return carve_layer_activations(a, nullptr, s, T);
}

// A model that only ever runs forward passes (the frozen reference, a logprob-only pass) gets the small layout of
// one shared layer scratch and no backward arena; once a forward needs backward, the model keeps the training
// layout (the logprob pass of the policy then reuses the training arena).
template <typename B>
void TransformerModel<B>::ensure_arenas(int T, bool for_backward) {
  if (fwd_ && !arenas_stale_ && T <= arena_tokens_ && (arena_backward_ || !for_backward)) return;
  const int tokens = std::max(T, arena_tokens_);
  const bool backward = arena_backward_ || for_backward;
  backward_ready_ = false;
  fwd_.reset();
  bwd_.reset();
  fwd_ = std::make_unique<Arena>(std::string(B::kName) + " forward activations", forward_bytes(tokens, backward),
                                 B::arena_allocator());
  if (backward)
    bwd_ = std::make_unique<Arena>(std::string(B::kName) + " backward scratch", backward_bytes(tokens),
                                   B::arena_allocator());
  arena_tokens_ = tokens;
  arena_backward_ = backward;
  arenas_stale_ = false;
}

template <typename B>
void TransformerModel<B>::reset_peaks() {
  B::sync(exec_);
  backward_ready_ = false;
  have_output_ = false;
  if (fwd_) {
    fwd_->reset();
    fwd_->reset_peak();
  }
  if (bwd_) {
    bwd_->reset();
    bwd_->reset_peak();
  }
}

template <typename B>
void TransformerModel<B>::release_arenas() {
  feed_forward_->release(exec_);
  B::sync(exec_);
  backward_ready_ = false;
  have_output_ = false;
  fwd_.reset();
  bwd_.reset();
  if (ring_) ring_->release();
}

template <typename B>
LayerBatch TransformerModel<B>::layer_batch(bool for_backward) const {
  LayerBatch b;
  b.positions = f_.positions, b.cu_seqlens = f_.cu_seqlens, b.T = T_, b.S = batch_.num_seqs();
  b.max_seqlen = max_seqlen_, b.inv_freq = inv_freq_.get();
  b.routing = routing_;
  if (for_backward) b.routing.record = nullptr;
  b.counted_rows = T_batch_;  // the sequence-parallel padding is not in the load-balancing loss
  return b;
}

template <typename B>
void TransformerModel<B>::forward(const PackedBatch& batch, float temperature, bool need_entropy, bool need_backward,
                                  const A* input, const MoeRouting& routing) {
  const int Tc = batch.num_tokens(), C = c_.hidden_size, V = c_.vocab_size, L = c_.num_hidden_layers;
  HONE_CHECK(Tc > 0 && batch.num_seqs() > 0 && batch.cu_seqlens.back() == Tc, "malformed packed batch");
  HONE_CHECK(int(batch.positions.size()) == Tc && int(batch.targets.size()) == Tc, "malformed packed batch");
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  for (int t = 0; t < Tc; ++t) {
    HONE_CHECK(batch.tokens[size_t(t)] >= 0 && batch.tokens[size_t(t)] < V, "token id ", batch.tokens[size_t(t)],
               " out of the vocabulary [0, ", V, ")");
    HONE_CHECK(batch.targets[size_t(t)] < V, "target id ", batch.targets[size_t(t)], " out of the vocabulary");
  }
  HONE_CHECK(span_.embedding || input, "a span without the embedding needs the previous chunk's hidden state");

  // The previous batch's uploads may still be in flight from batch_ (and the split's arrays); wait before
  // overwriting the host copies.
  B::sync(exec_);
  batch_ = cp_ ? cp_->split(batch, split_multiple()).local : batch;  // under cp: this rank's rows
  const int T = batch_.num_tokens();
  int max_seqlen = 0;
  for (int s = 0; s < batch_.num_seqs(); ++s)
    max_seqlen = std::max(max_seqlen, batch_.seq_end(s) - batch_.seq_begin(s));
  T_caller_ = Tc;
  T_batch_ = T;
  pad_for_sequence_parallelism();
  T_ = batch_.num_tokens();
  max_seqlen_ = std::max(max_seqlen, T_ - T);  // the padding sequence
  routing_ = routing;
  temperature_ = temperature;
  have_entropy_ = need_entropy;
  ensure_arenas(T, need_backward);
  fwd_->reset();
  if (bwd_) bwd_->reset();
  const ForwardPlan p = plan(T_, batch_.num_seqs(), Tc, need_backward);
  const size_t bytes = carve_forward<B>(f_, nullptr, c_, shape_, p);
  carve_forward<B>(f_, static_cast<char*>(fwd_->alloc_bytes(bytes, "forward activations")), c_, shape_, p);

  auto upload = [&](int32_t* dst, const std::vector<int32_t>& src) {
    B::upload(exec_, dst, src.data(), src.size() * sizeof(int32_t));
  };
  upload(f_.tokens, batch_.tokens);
  upload(f_.positions, batch_.positions);
  upload(f_.targets, batch_.targets);
  upload(f_.cu_seqlens, batch_.cu_seqlens);

  const LayerBatch lb = layer_batch(/*for_backward=*/false);
  const A* w = w_;
  const int Tp = T_, Tl = local_rows(Tp);  // with the padding; this rank's rows
  const bool sp = Tl != Tp;
  dres_ = nullptr;
  have_output_ = false;
  A* x0 = f_.x[size_t(span_.layer_begin)];
  if (!span_.embedding) {  // the previous chunk's output: this rank's rows of the residual stream
    B::copy(exec_, x0, input, size_t(Tl) * size_t(C) * sizeof(A));
  } else {
    typename B::Scope ps(exec_, "embedding");
    if (tp_) tp_->embedding_forward(x0, f_.tokens, w + layout_.embed_tokens, Tp, sp);
    else B::embedding_forward(exec_, x0, f_.tokens, w + layout_.embed_tokens, T, C);
  }
  for (int l = span_.layer_begin; l < span_.layer_end; ++l) {
    LayerActivations<B>& a = f_.saved[size_t(l)];
    a.x_in = f_.x[size_t(l)];
    layer_forward<B>(l, shape_, layer_pointers<const A>(layout_.layers[size_t(l)], w), lb, a, f_.fscratch,
                     attention(), feed_forward(), layers(), f_.x[size_t(l + 1)], exec_);
  }
  if (!span_.head) {
    backward_ready_ = need_backward;
    have_output_ = true;
    return;
  }
  {
    typename B::Scope ps(exec_, "rmsnorm");
    B::rmsnorm_forward(exec_, f_.h_f_local, f_.rstd_f, f_.x[size_t(L)], w + layout_.norm, Tl, C, c_.rms_norm_eps);
    if (sp) tp_->gather_rows(f_.h_f_local, f_.h_f, Tp);
  }
  {
    typename B::Scope ps(exec_, "lm_head");
    float* entropy = need_entropy ? f_.entropy : nullptr;
    if (tp_)
      tp_->lm_head_forward(f_.logprob, entropy, f_.lse_f, f_.h_f, w + layout_.lm_head, f_.targets, Tp, temperature,
                           chunk_v_);
    else if (f_.kept_logits)  // laid out only for a forward with a backward to follow
      B::lm_head_saved_forward(exec_, f_.logprob, entropy, f_.lse_f, f_.kept_logits, f_.h_f, w + layout_.lm_head,
                               f_.targets, T, C, V, temperature, chunk_v_);
    else
      B::lm_head_logprob_forward(exec_, f_.logprob, entropy, f_.lse_f, f_.h_f, w + layout_.lm_head, f_.targets, T, C,
                                 V, temperature, chunk_v_);
  }
  if (!need_entropy) B::zero(exec_, f_.entropy, size_t(Tp) * sizeof(float));
  if (cp_) {  // every rank gets the values of all the caller's rows
    cp_->gather_rows(f_.logprob, f_.logprob_all);
    cp_->gather_rows(f_.entropy, f_.entropy_all);
  }
  backward_ready_ = need_backward;
}

template <typename B>
std::vector<float> TransformerModel<B>::logprobs_host() const {
  std::vector<float> out(static_cast<size_t>(T_caller_));
  B::download(exec_, out.data(), logprobs(), out.size() * sizeof(float));
  B::sync(exec_);
  return out;
}

template <typename B>
std::vector<float> TransformerModel<B>::entropy_host() const {
  std::vector<float> out(static_cast<size_t>(T_caller_));
  B::download(exec_, out.data(), entropy(), out.size() * sizeof(float));
  B::sync(exec_);
  return out;
}

template <typename B>
void TransformerModel<B>::backward_host(const std::vector<float>& dlogprob, const std::vector<float>* dentropy,
                                        float* grads) {
  const int T = T_caller_;
  HONE_CHECK(int(dlogprob.size()) == T && (!dentropy || int(dentropy->size()) == T),
             "backward weights must have one value per token of the last forward");
  // Staged in the forward arena's tail would disturb its layout; use a small temporary instead.
  typename B::template Array<float> d(2 * int64_t(T), "token gradients");
  B::upload(exec_, d.get(), dlogprob.data(), size_t(T) * 4);
  if (dentropy) B::upload(exec_, d.get() + T, dentropy->data(), size_t(T) * 4);
  backward(d.get(), dentropy ? d.get() + T : nullptr, grads);
  B::sync(exec_);  // before d is freed
}

template <typename B>
void TransformerModel<B>::backward(const float* dlogprob, const float* dentropy, ModelWeights& grads,
                                   const A* output_grad) {
  HONE_CHECK(grads.flat.numel() == layout_.num_params, "gradient buffer is not shaped like the weights");
  backward(dlogprob, dentropy, grads.flat.f32(), output_grad);
}

template <typename B>
void TransformerModel<B>::backward(const float* dlogprob, const float* dentropy, float* grads, const A* output_grad) {
  HONE_CHECK(backward_ready_, "backward needs a forward first (and runs once per forward)");
  HONE_CHECK(dentropy == nullptr || have_entropy_, "a gradient of the entropy needs forward(need_entropy=true)");
  HONE_CHECK((span_.head ? dlogprob != nullptr : output_grad != nullptr) && grads != nullptr,
             span_.head ? "backward needs dlogprob and a gradient buffer"
                        : "a span without the head needs its output's gradient and a gradient buffer");
  backward_ready_ = false;
  const int T = T_, C = c_.hidden_size, V = c_.vocab_size, L = c_.num_hidden_layers;  // T: with the padding
  const int Tl = local_rows(T);
  const bool sp = Tl != T;
  const size_t TlC = size_t(Tl) * size_t(C);
  if (cp_) {  // this rank's rows of the caller's gradients (none on the split's padding rows)
    cp_->take_local_rows(dlogprob, f_.dlogprob_local);
    dlogprob = f_.dlogprob_local;
    if (dentropy) {
      cp_->take_local_rows(dentropy, f_.dentropy_local);
      dentropy = f_.dentropy_local;
    }
  }

  // The arena in backward_bytes' order.
  bwd_->reset();
  A* dres = static_cast<A*>(bwd_->alloc_bytes(TlC * sizeof(A), "dres"));
  A* dh_f = static_cast<A*>(bwd_->alloc_bytes(TlC * sizeof(A), "dh final"));
  if (sp) {
    // The padding tokens get no gradient: the batch's rows are copied, only the padding rows after them zeroed.
    float* padded = static_cast<float*>(bwd_->alloc_bytes(2 * size_t(T) * sizeof(float), "padded token gradients"));
    if (span_.head) {
      const size_t pad_bytes = size_t(T - T_batch_) * sizeof(float);
      B::copy(exec_, padded, dlogprob, size_t(T_batch_) * sizeof(float));
      B::zero(exec_, padded + T_batch_, pad_bytes);
      dlogprob = padded;
      if (dentropy) {
        B::copy(exec_, padded + T, dentropy, size_t(T_batch_) * sizeof(float));
        B::zero(exec_, padded + T + T_batch_, pad_bytes);
        dentropy = padded + T;
      }
    }
  }
  LayerScratch<B> s = f_.fscratch;  // the forward scratch (branch) serves recomputed layers
  const size_t scratch_bytes = carve_layer_backward_scratch(s, nullptr, shape_, T, Tl);
  carve_layer_backward_scratch(s, static_cast<char*>(bwd_->alloc_bytes(scratch_bytes, "layer gradient scratch")),
                               shape_, T, Tl);

  const A* w = w_;
  if (!span_.head) {  // the next chunk's gradient of this span's output: this rank's rows
    B::copy(exec_, dres, output_grad, TlC * sizeof(A));
  } else {
    {  // the LM head's backward accumulates into dh_f; the final norm's backward writes dres (its first producer)
      typename B::Scope ps(exec_, "memset");
      B::zero(exec_, dh_f, TlC * sizeof(A));
    }
    {
      typename B::Scope ps(exec_, "lm_head_backward");
      const float* saved_entropy = have_entropy_ ? f_.entropy : nullptr;
      if (tp_)
        tp_->lm_head_backward(dh_f, grads + layout_.lm_head, dlogprob, dentropy, f_.h_f, w + layout_.lm_head,
                              f_.targets, f_.lse_f, saved_entropy, T, temperature_, chunk_v_, sp);
      else if (f_.kept_logits)
        B::lm_head_saved_backward(exec_, dh_f, grads + layout_.lm_head, dlogprob, dentropy, f_.h_f,
                                  w + layout_.lm_head, f_.targets, f_.lse_f, saved_entropy, f_.kept_logits, T, C, V,
                                  temperature_, chunk_v_);
      else
        B::lm_head_logprob_backward(exec_, dh_f, grads + layout_.lm_head, dlogprob, dentropy, f_.h_f,
                                    w + layout_.lm_head, f_.targets, f_.lse_f, saved_entropy, T, C, V, temperature_,
                                    chunk_v_);
    }
    typename B::Scope ps(exec_, "rmsnorm_backward");
    B::rmsnorm_backward(exec_, dres, grads + layout_.norm, dh_f, f_.x[size_t(L)], w + layout_.norm, f_.rstd_f, Tl, C,
                        /*accumulate=*/false);
  }
  const LayerBatch lb = layer_batch(/*for_backward=*/true);
  for (int l = span_.layer_end - 1; l >= span_.layer_begin; --l) {
    LayerActivations<B> a = f_.saved[size_t(l)];
    a.x_in = f_.x[size_t(l)];
    const auto wl = layer_pointers<const A>(layout_.layers[size_t(l)], w);
    // A fully recomputed layer reruns its forward into the shared scratch; its output is rewritten with the same
    // values it had (the next layer's input, already consumed), so nothing downstream changes. A selective one
    // reruns only its elementwise ops from what it kept.
    if (recompute_[size_t(l)] == Recompute::full) {
      layer_forward<B>(l, shape_, wl, lb, a, s, attention(), feed_forward(), layers(), f_.x[size_t(l + 1)], exec_);
    } else if (recompute_[size_t(l)] == Recompute::selective) {
      typename B::Scope ps(exec_, "recompute");
      recompute_selective_activations<B>(shape_, wl, lb, a, Tl, exec_);
    }
    layer_backward<B>(l, shape_, wl, layer_pointers<float>(layout_.layers[size_t(l)], grads), lb, a, s, attention(),
                      feed_forward(), layers(), dres, exec_);
    if (layer_hook_) layer_hook_(l);
  }
  dres_ = dres;
  if (span_.embedding) {
    typename B::Scope ps(exec_, "embedding_backward");
    if (tp_) tp_->embedding_backward(grads + layout_.embed_tokens, dres, f_.tokens, T, sp);
    else B::embedding_backward(exec_, grads + layout_.embed_tokens, dres, f_.tokens, T, C);
  }
  if (layer_hook_) layer_hook_(-1);
}

#define HONE_INSTANTIATE_TRANSFORMER(B)                                                                         \
  template size_t carve_forward<B>(ForwardRegions<B>&, char*, const ModelConfig&, const LayerShape&,           \
                                   const ForwardPlan&);                                                        \
  template size_t backward_bytes<B>(const ModelConfig&, const LayerShape&, int, int);                         \
  template class TransformerModel<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_TRANSFORMER)
#undef HONE_INSTANTIATE_TRANSFORMER

}  // namespace hone
