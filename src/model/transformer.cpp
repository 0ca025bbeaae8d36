// The transformer's forward and backward over the layers, the final norm and the fused LM head, and the
// activation arena sized from the number of tokens.
#include "model/transformer.h"

#include <algorithm>
#include <cstring>

#include "model/layer_recompute.h"
#include "model/moe_feed_forward.h"
#include "ops/ops.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/ring_attention.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"

namespace hone {
namespace {

int64_t aligned(int64_t n) { return (n + 15) / 16 * 16; }
// The carved regions' floats (they are whole multiples of 64 bytes, as aligned() counts).
int64_t floats(size_t bytes) { return int64_t(bytes / sizeof(float)); }
char* bytes_at(float* p) { return reinterpret_cast<char*>(p); }
using Acts = LayerActivations<CpuBackend>;
using Scratch = LayerScratch<CpuBackend>;

}  // namespace

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, TensorParallel* tp, ModelSpan span,
                         ContextParallel* cp, ExpertParallel* ep)
    : c_(config),
      tp_(tp),
      cp_(cp),
      ring_(cp ? std::make_unique<RingAttention>(*cp) : nullptr),
      span_(span.resolved(config.num_hidden_layers)),
      shape_(tp ? tp->shape() : ep ? ep->shape() : layer_shape(config)),
      w_(weights),
      feed_forward_(make_layer_feed_forward<CpuBackend>(config, ep)),
      recompute_(size_t(config.num_hidden_layers), Recompute::none) {
  HONE_CHECK(int(w_.layers.size()) == c_.num_hidden_layers, "weights have ", w_.layers.size(), " layers, config ",
             c_.num_hidden_layers);
  HONE_CHECK(c_.rope.head_dim == c_.head_dim, "rope.head_dim ", c_.rope.head_dim, " != head_dim ", c_.head_dim);
  HONE_CHECK(span_.layer_begin >= 0 && span_.layer_begin <= span_.layer_end &&
                 span_.layer_end <= c_.num_hidden_layers && (!span_.embedding || span_.layer_begin == 0) &&
                 (!span_.head || span_.layer_end == c_.num_hidden_layers),
             "a span of layers [", span_.layer_begin, ", ", span_.layer_end, ") of ", c_.num_hidden_layers,
             span_.embedding ? " with the embedding" : "", span_.head ? " with the head" : "");
  for (int l = span_.layer_begin; l < span_.layer_end; ++l)
    HONE_CHECK(w_.layers[size_t(l)].q_proj.defined(), "the weights lack layer ", l, " of the span");
  HONE_CHECK(!span_.embedding || w_.embed_tokens.defined(), "the weights lack the embedding of the span");
  HONE_CHECK(!span_.head || (w_.norm.defined() && w_.lm_head.defined()), "the weights lack the head of the span");
  HONE_CHECK(!cp_ || (span_.embedding && span_.head), "context parallelism runs the whole model, not a span");
  inv_freq_.resize(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv_freq_.data(), c_.rope);
}

Transformer::~Transformer() = default;

LayerAttention<CpuBackend>& Transformer::attention() {
  return ring_ ? static_cast<LayerAttention<CpuBackend>&>(*ring_) : attention_;
}

LayerFeedForward<CpuBackend>& Transformer::feed_forward() { return *feed_forward_; }

int Transformer::split_multiple() const { return tp_ && tp_->sequence_parallel() ? tp_->size() : 1; }

void Transformer::set_recompute(Recompute r) { recompute_.assign(recompute_.size(), r); }

void Transformer::set_layer_recompute(int layer, Recompute r) {
  HONE_CHECK(layer >= 0 && layer < int(recompute_.size()), "layer ", layer, " out of range");
  recompute_[size_t(layer)] = r;
}

int64_t Transformer::layer_activation_floats(const LayerShape& s, int T) {
  Acts a;
  return floats(carve_layer_activations(a, nullptr, s, T));
}

// Sequence parallelism splits the tokens in tp equal slices: a batch that tp does not divide gets a padding
// sequence (token 0, no targets) that nothing reads back.
void Transformer::pad_for_sequence_parallelism() {
  if (!tp_ || !tp_->sequence_parallel()) return;
  const int T = batch_.num_tokens(), pad = (tp_->size() - T % tp_->size()) % tp_->size();
  for (int i = 0; i < pad; ++i) {
    batch_.tokens.push_back(0);
    batch_.positions.push_back(i);
    batch_.targets.push_back(-1);
  }
  if (pad > 0) batch_.cu_seqlens.push_back(T + pad);
}

int Transformer::local_rows(int T) const { return tp_ ? tp_->local_rows(T) : T; }

int Transformer::boundary_rows(int T) const {
  if (!tp_ || !tp_->sequence_parallel()) return T;
  return local_rows(T + (tp_->size() - T % tp_->size()) % tp_->size());
}

const float* Transformer::output() const {
  HONE_CHECK(!span_.head && backward_ready_, "output() is the hidden state a span without the head hands on");
  return x_[size_t(span_.layer_end)];
}

const float* Transformer::input_grad() const {
  HONE_CHECK(!span_.embedding && dres_, "input_grad() is what a span without the embedding hands back");
  return dres_;
}

int64_t Transformer::forward_floats(int T) const {
  const int64_t C = c_.hidden_size, Tl = local_rows(T);
  const int64_t layers = span_.layer_end - span_.layer_begin;
  Acts a, scratch;
  Scratch fs;
  const int64_t whole = floats(carve_layer_activations(a, nullptr, shape_, T, int(Tl)));
  const int64_t kept = floats(carve_selective_activations(a, nullptr, scratch, shape_, T, int(Tl)));
  int64_t n = (layers + 1) * aligned(Tl * C) + floats(carve_layer_forward_scratch(fs, nullptr, shape_, T, int(Tl)));
  bool shared = false;  // a layer recomputes into the shared scratch
  for (int l = span_.layer_begin; l < span_.layer_end; ++l) {
    const Recompute r = recompute_[size_t(l)];
    shared = shared || r != Recompute::none;
    n += r == Recompute::none ? whole : r == Recompute::selective ? kept : 0;
  }
  if (shared) n += whole;
  if (span_.head) n += aligned(Tl) + aligned(T * C) + 3 * aligned(T);  // final rstd, h, lse, logprob, entropy
  if (Tl != T) n += (span_.head ? aligned(Tl * C) : 0) + floats(carve_gathered_rows(a, nullptr, shape_, int(T)));
  return n;
}

int64_t Transformer::forward_floats(const ModelConfig& c, const LayerShape& shape, int T, int local_rows,
                                    Recompute recompute) {
  const int64_t C = c.hidden_size, L = c.num_hidden_layers, Tl = local_rows;
  Acts a, scratch;
  Scratch fs;
  const int64_t whole = floats(carve_layer_activations(a, nullptr, shape, T, int(Tl)));
  const int64_t kept = floats(carve_selective_activations(a, nullptr, scratch, shape, T, int(Tl)));
  int64_t n = (L + 1) * aligned(Tl * C) + floats(carve_layer_forward_scratch(fs, nullptr, shape, T, int(Tl)));
  n += L * (recompute == Recompute::none ? whole : recompute == Recompute::selective ? kept : 0);
  if (recompute != Recompute::none) n += whole;  // the shared scratch of the recomputed layers
  n += aligned(Tl) + aligned(T * C) + 3 * aligned(T);  // final rstd, h, lse, logprob, entropy
  if (Tl != T) n += aligned(Tl * C) + floats(carve_gathered_rows(a, nullptr, shape, int(T)));
  return n;
}

int64_t Transformer::backward_floats(const ModelConfig& c, const LayerShape& shape, int T, int local_rows) {
  Scratch g;
  return 2 * aligned(int64_t(local_rows) * c.hidden_size) +
         floats(carve_layer_backward_scratch(g, nullptr, shape, T, local_rows));
}

// Lays the forward arena out for T tokens, growing it when needed.
void Transformer::plan_forward(int T) {
  const int64_t C = c_.hidden_size, L = c_.num_hidden_layers;
  const int Tl = local_rows(T), b = span_.layer_begin, e = span_.layer_end;
  act_used_ = forward_floats(T);
  if (!act_.defined() || act_.numel() < act_used_) act_ = Tensor::empty({act_used_});
  float* p = act_.f32();
  x_.assign(size_t(L + 1), nullptr);  // the span's streams only: its input, then each of its layers' outputs
  for (int l = b; l <= e; ++l) {
    x_[size_t(l)] = p;
    p += aligned(Tl * C);
  }
  saved_.assign(size_t(L), Acts{});
  scratch_ = Acts{};
  fscratch_ = Scratch{};
  p += floats(carve_layer_forward_scratch(fscratch_, bytes_at(p), shape_, T, Tl));
  bool shared = false;
  for (int l = b; l < e; ++l) shared = shared || recompute_[size_t(l)] != Recompute::none;
  if (shared) p += floats(carve_layer_activations(scratch_, bytes_at(p), shape_, T, Tl));
  for (int l = b; l < e; ++l) {
    Acts& a = saved_[size_t(l)];
    switch (recompute_[size_t(l)]) {
      case Recompute::none: p += floats(carve_layer_activations(a, bytes_at(p), shape_, T, Tl)); break;
      case Recompute::selective:
        p += floats(carve_selective_activations(a, bytes_at(p), scratch_, shape_, T, Tl));
        break;
      case Recompute::full: a = scratch_; break;
    }
  }
  if (Tl != T) {  // sequence parallelism: every layer's gathered rows in one shared place
    Acts shared;
    p += floats(carve_gathered_rows(shared, bytes_at(p), shape_, T));
    for (Acts& a : saved_) a.h1 = shared.h1, a.h2 = shared.h2;
  }
  if (!span_.head) {
    rstd_f_ = h_f_ = h_f_local_ = lse_f_ = nullptr;
    logprob_ = entropy_ = Tensor();
    HONE_CHECK(p - act_.f32() == act_used_, "arena layout mismatch");
    return;
  }
  rstd_f_ = p;
  p += aligned(Tl);
  h_f_ = p;
  p += aligned(T * C);
  h_f_local_ = h_f_;
  if (Tl != T) {
    h_f_local_ = p;
    p += aligned(Tl * C);
  }
  lse_f_ = p;
  p += aligned(T);
  logprob_ = Tensor::view(p, {T_batch_}, DType::f32);
  p += aligned(T);
  entropy_ = Tensor::view(p, {T_batch_}, DType::f32);
  p += aligned(T);
  HONE_CHECK(p - act_.f32() == act_used_, "arena layout mismatch");
}

void Transformer::layer_inputs(int layer, Acts& a) const { a.x_in = x_[size_t(layer)]; }

void Transformer::forward(const PackedBatch& batch, float temperature, bool need_entropy, const float* input) {
  const int T = batch.num_tokens(), C = c_.hidden_size, V = c_.vocab_size, L = c_.num_hidden_layers;
  HONE_CHECK(T > 0 && batch.num_seqs() > 0 && batch.cu_seqlens.back() == T, "malformed packed batch");
  HONE_CHECK(int(batch.positions.size()) == T && int(batch.targets.size()) == T, "malformed packed batch");
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  for (int t = 0; t < T; ++t) {
    HONE_CHECK(batch.tokens[size_t(t)] >= 0 && batch.tokens[size_t(t)] < V, "token id ", batch.tokens[size_t(t)],
               " out of the vocabulary [0, ", V, ")");
    HONE_CHECK(batch.targets[size_t(t)] < V, "target id ", batch.targets[size_t(t)], " out of the vocabulary");
  }
  T_caller_ = T;
  batch_ = cp_ ? cp_->split(batch, split_multiple()).local : batch;
  T_batch_ = batch_.num_tokens();
  pad_for_sequence_parallelism();
  T_ = batch_.num_tokens();
  if (MoeFeedForward* m = moe()) m->set_counted_rows(T_batch_);  // the padding is not in the load-balancing loss
  temperature_ = temperature;
  have_entropy_ = need_entropy;
  HONE_CHECK(span_.embedding || input, "a span without the embedding needs the previous chunk's hidden state");
  plan_forward(T_);
  dres_ = nullptr;
  const bool sp = local_rows(T_) != T_;

  {
    const int T = T_;  // with the padding
    const LayerBatch lb{batch_.positions.data(), batch_.cu_seqlens.data(), T, batch_.num_seqs(), 0, inv_freq_.data()};
    float* x0 = x_[size_t(span_.layer_begin)];
    if (!span_.embedding)
      std::memcpy(x0, input, sizeof(float) * size_t(local_rows(T)) * size_t(C));
    else if (tp_)
      tp_->embedding_forward(x0, batch_.tokens.data(), w_.embed_tokens.f32(), T, sp);
    else
      cpu::embedding_forward(x0, batch_.tokens.data(), w_.embed_tokens.f32(), T, C);
    for (int l = span_.layer_begin; l < span_.layer_end; ++l) {
      Acts& a = saved_[size_t(l)];
      layer_inputs(l, a);
      layer_forward<CpuBackend>(l, shape_, layer_pointers(w_.layers[size_t(l)]), lb, a, fscratch_, attention(),
                                feed_forward(), layers(), x_[size_t(l + 1)], {});
    }
    if (!span_.head) {
      backward_ready_ = true;
      return;
    }
    cpu::rmsnorm_forward(h_f_local_, rstd_f_, x_[size_t(L)], w_.norm.f32(), local_rows(T), C, c_.rms_norm_eps);
    if (sp) tp_->gather_rows(h_f_local_, h_f_, T);
  }
  if (tp_)
    tp_->lm_head_forward(logprob_.f32(), need_entropy ? entropy_.f32() : nullptr, lse_f_, h_f_, w_.lm_head.f32(),
                         batch_.targets.data(), T_, temperature, chunk_v_);
  else
    cpu::lm_head_logprob_forward(logprob_.f32(), need_entropy ? entropy_.f32() : nullptr, lse_f_, h_f_,
                                 w_.lm_head.f32(), batch_.targets.data(), T_, C, V, temperature, chunk_v_);
  if (!need_entropy) std::memset(entropy_.f32(), 0, sizeof(float) * size_t(T_));
  if (cp_) {  // every rank gets the values of all the caller's rows
    logprob_all_ = Tensor::empty({T_caller_});
    entropy_all_ = Tensor::empty({T_caller_});
    cp_->gather_rows(logprob_.f32(), logprob_all_.f32());
    cp_->gather_rows(entropy_.f32(), entropy_all_.f32());
  }
  backward_ready_ = true;
}

void Transformer::backward(const float* dlogprob, const float* dentropy, ModelWeights& grads,
                           const float* output_grad) {
  HONE_CHECK(backward_ready_, "backward needs a forward first (and runs once per forward)");
  HONE_CHECK(span_.head ? dlogprob != nullptr : output_grad != nullptr,
             span_.head ? "backward needs dlogprob" : "a span without the head needs its output's gradient");
  HONE_CHECK(dentropy == nullptr || have_entropy_, "a gradient of the entropy needs forward(need_entropy=true)");
  HONE_CHECK(grads.flat.numel() == w_.flat.numel() && grads.layers.size() == w_.layers.size(),
             "gradient buffer is not shaped like the weights");
  backward_ready_ = false;
  const int T = T_, C = c_.hidden_size, V = c_.vocab_size, L = c_.num_hidden_layers;
  const int Tl = local_rows(T);
  const bool sp = Tl != T;
  if (cp_) {  // this rank's rows of the caller's gradients (none on the split's padding rows)
    dlogprob_local_.resize(size_t(T_batch_));
    cp_->take_local_rows(dlogprob, dlogprob_local_.data());
    dlogprob = dlogprob_local_.data();
    if (dentropy) {
      dentropy_local_.resize(size_t(T_batch_));
      cp_->take_local_rows(dentropy, dentropy_local_.data());
      dentropy = dentropy_local_.data();
    }
  }
  if (span_.head && T != T_batch_) {  // the padding rows get no gradient
    dlogprob_pad_.assign(size_t(T), 0.f);
    std::copy_n(dlogprob, T_batch_, dlogprob_pad_.begin());
    dlogprob = dlogprob_pad_.data();
    if (dentropy) {
      dentropy_pad_.assign(size_t(T), 0.f);
      std::copy_n(dentropy, T_batch_, dentropy_pad_.begin());
      dentropy = dentropy_pad_.data();
    }
  }

  Scratch s = fscratch_;  // the forward scratch (branch) serves recomputed layers
  grad_used_ = backward_floats(c_, shape_, T, Tl);
  if (!grad_.defined() || grad_.numel() < grad_used_) grad_ = Tensor::empty({grad_used_});
  float* dres = grad_.f32();
  float* dh_f = dres + aligned(int64_t(Tl) * C);
  carve_layer_backward_scratch(s, bytes_at(dh_f + aligned(int64_t(Tl) * C)), shape_, T, Tl);

  if (span_.head) {
    std::memset(dh_f, 0, sizeof(float) * size_t(Tl) * size_t(C));
    const float* saved_entropy = have_entropy_ ? entropy_.f32() : nullptr;
    if (tp_)
      tp_->lm_head_backward(dh_f, grads.lm_head.f32(), dlogprob, dentropy, h_f_, w_.lm_head.f32(),
                            batch_.targets.data(), lse_f_, saved_entropy, T, temperature_, chunk_v_, sp);
    else
      cpu::lm_head_logprob_backward(dh_f, grads.lm_head.f32(), dlogprob, dentropy, h_f_, w_.lm_head.f32(),
                                    batch_.targets.data(), lse_f_, saved_entropy, T, C, V, temperature_, chunk_v_);
    std::memset(dres, 0, sizeof(float) * size_t(Tl) * size_t(C));
    cpu::rmsnorm_backward(dres, grads.norm.f32(), dh_f, x_[size_t(L)], w_.norm.f32(), rstd_f_, Tl, C);
  } else {
    std::memcpy(dres, output_grad, sizeof(float) * size_t(Tl) * size_t(C));
  }

  const LayerBatch lb{batch_.positions.data(), batch_.cu_seqlens.data(), T, batch_.num_seqs(), 0, inv_freq_.data()};
  for (int l = span_.layer_end - 1; l >= span_.layer_begin; --l) {
    Acts a = saved_[size_t(l)];
    layer_inputs(l, a);
    const LayerWeightPtrs<CpuBackend> wl = layer_pointers(w_.layers[size_t(l)]);
    // A fully recomputed layer reruns its forward into the shared scratch; its output is rewritten with the same
    // values it had (the next layer's input, already consumed), so nothing downstream changes. A selective one
    // reruns only its elementwise ops from what it kept.
    if (recompute_[size_t(l)] == Recompute::full)
      layer_forward<CpuBackend>(l, shape_, wl, lb, a, s, attention(), feed_forward(), layers(), x_[size_t(l + 1)], {});
    else if (recompute_[size_t(l)] == Recompute::selective)
      recompute_selective_activations<CpuBackend>(shape_, wl, lb, a, Tl, {});
    layer_backward<CpuBackend>(l, shape_, wl, layer_grad_pointers(grads.layers[size_t(l)]), lb, a, s, attention(),
                               feed_forward(), layers(), dres, {});
  }
  dres_ = dres;
  if (!span_.embedding) return;
  if (tp_) tp_->embedding_backward(grads.embed_tokens.f32(), dres, batch_.tokens.data(), T, sp);
  else cpu::embedding_backward(grads.embed_tokens.f32(), dres, batch_.tokens.data(), T, C);
}

MoeFeedForward* Transformer::moe() const { return dynamic_cast<MoeFeedForward*>(feed_forward_.get()); }

LayerCollectives<float>* Transformer::layers() const { return tp_ ? tp_->layers() : nullptr; }

}  // namespace hone
