// GpuTransformer: the layers strung together on the device, the final norm and the fused LM head, the
// parameter layout and the activation arenas (forward: saved activations; backward: gradient scratch).
#include "model/gpu_transformer.h"

#if HONE_CUDA

#include <algorithm>

#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "model/layer_recompute.h"
#include "model/gpu_moe_feed_forward.h"
#include "backend/op_profiler.h"
#include "parallel/gpu_context_parallel.h"
#include "parallel/gpu_expert_parallel.h"
#include "parallel/gpu_ring_attention.h"
#include "parallel/gpu_tensor_parallel.h"
#include "runtime/error.h"

namespace hone {
GpuTransformer::GpuTransformer(const ModelConfig& config, const ParamLayout& layout, const cuda::GpuContext& ctx,
                               int max_tokens, GpuTensorParallel* tp, ModelSpan span, bf16* shared_weights,
                               GpuContextParallel* cp, GpuExpertParallel* ep)
    : c_(config),
      tp_(tp),
      cp_(cp),
      ring_(cp ? std::make_unique<GpuRingAttention>(*cp, ctx) : nullptr),
      shape_(tp ? tp->shape() : ep ? ep->shape() : layer_shape(config)),
      layout_(layout),
      ctx_(ctx),
      span_(span.resolved(config.num_hidden_layers)),
      recompute_(size_t(config.num_hidden_layers), Recompute::none),
      feed_forward_(make_layer_feed_forward<CudaBackend>(config, ep)),
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
             "a span of layers [", span_.layer_begin, ", ", span_.layer_end, ") of ", c_.num_hidden_layers);
  for (int l = span_.layer_begin; l < span_.layer_end; ++l)
    HONE_CHECK(layout_.layers[size_t(l)][LayerParam::q_proj] >= 0, "the layout lacks layer ", l, " of the span");
  HONE_CHECK(!span_.embedding || layout_.embed_tokens >= 0, "the layout lacks the embedding of the span");
  HONE_CHECK(!span_.head || (layout_.norm >= 0 && layout_.lm_head >= 0), "the layout lacks the head of the span");
  if (shared_weights) {
    w_ = shared_weights;
  } else {
    weights_ = DeviceArray<bf16>(layout.num_params);
    w_ = weights_.get();
  }
  HONE_CHECK(c_.rope.head_dim == c_.head_dim, "rope.head_dim ", c_.rope.head_dim, " != head_dim ", c_.head_dim);
  HONE_CHECK(max_tokens > 0, "max_tokens must be positive");
  std::vector<float> inv(size_t(c_.head_dim / 2));
  cpu::rope_inv_freq(inv.data(), c_.rope);
  CUDA_CHECK(cudaMemcpy(inv_freq_.get(), inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  arena_tokens_ = local_tokens(max_tokens);  // the first forward allocates the arenas, for what it needs
}

GpuTransformer::~GpuTransformer() = default;

int GpuTransformer::local_tokens(int tokens) const {
  if (!cp_) return tokens;
  const int C = cp_->size();
  return 2 * ((tokens + 2 * C - 1) / (2 * C));
}

LayerAttention<CudaBackend>& GpuTransformer::attention() {
  return ring_ ? static_cast<LayerAttention<CudaBackend>&>(*ring_) : attention_;
}

LayerFeedForward<CudaBackend>& GpuTransformer::feed_forward() { return *feed_forward_; }

void GpuTransformer::set_shared_weights(bf16* w) {
  HONE_CHECK(!weights_.get() && w, "only a model built on shared weights follows them to a new place");
  w_ = w;
}

const bf16* GpuTransformer::output() const {
  HONE_CHECK(!span_.head && have_output_, "output() is the hidden state a span without the head hands on");
  return x_[size_t(span_.layer_end)];
}

const bf16* GpuTransformer::input_grad() const {
  HONE_CHECK(!span_.embedding && dres_, "input_grad() is what a span without the embedding hands back");
  return dres_;
}

void upload_bf16(const ModelWeights& w, bf16* dst, int64_t n, const cuda::GpuContext& ctx) {
  HONE_CHECK(w.flat.numel() == n, "weights have ", w.flat.numel(), " parameters, the buffer ", n);
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(n, 1), int64_t(1) << 26);  // 256 MiB of fp32
  DeviceArray<float> staging(chunk);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t k = std::min(chunk, n - off);
    CUDA_CHECK(cudaMemcpyAsync(staging.get(), w.flat.f32() + off, size_t(k) * sizeof(float), cudaMemcpyHostToDevice,
                               ctx.stream));
    cuda::f32_to_bf16(dst + off, staging.get(), k, ctx);
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // the staging buffer is freed on return
}

void GpuTransformer::upload_weights(const ModelWeights& w) { upload_bf16(w, w_, layout_.num_params, ctx_); }

void GpuTransformer::set_recompute(Recompute r) {
  recompute_.assign(recompute_.size(), r);
  arenas_stale_ = true;  // the layout changed: re-size on the next forward, which also lays the saved data out
  backward_ready_ = false;
}

bool GpuTransformer::keeps_logits(bool for_backward) const {
  return for_backward && keep_logits_ && span_.head && !tp_ &&
         std::all_of(recompute_.begin(), recompute_.end(), [](Recompute r) { return r == Recompute::none; });
}

void GpuTransformer::set_layer_recompute(int layer, Recompute r) {
  HONE_CHECK(layer >= 0 && layer < int(recompute_.size()), "layer ", layer, " out of range");
  recompute_[size_t(layer)] = r;
  arenas_stale_ = true;
  backward_ready_ = false;
}

int GpuTransformer::padded_tokens(int T) const {
  if (!tp_ || !tp_->sequence_parallel()) return T;
  return (T + tp_->size() - 1) / tp_->size() * tp_->size();
}

int GpuTransformer::local_rows(int T) const { return tp_ ? tp_->local_rows(T) : T; }

int GpuTransformer::boundary_rows(int T) const { return boundary_rows(tp_, T); }

int GpuTransformer::boundary_rows(const GpuTensorParallel* tp, int T) {
  if (!tp) return T;
  const int Tp = tp->sequence_parallel() ? (T + tp->size() - 1) / tp->size() * tp->size() : T;
  return tp->local_rows(Tp);
}

LayerCollectives<bf16>* GpuTransformer::layers() const { return tp_ ? tp_->layers() : nullptr; }

// Sequence parallelism splits the tokens in tp equal parts: a batch that tp does not divide gets a padding sequence
// (token 0, no targets) that nothing reads back (as the CPU engine's Transformer).
void GpuTransformer::pad_for_sequence_parallelism() {
  const int T = batch_.num_tokens(), pad = padded_tokens(T) - T;
  for (int i = 0; i < pad; ++i) {
    batch_.tokens.push_back(0);
    batch_.positions.push_back(i);
    batch_.targets.push_back(-1);
  }
  if (pad > 0) batch_.cu_seqlens.push_back(T + pad);
}

// One code path both counts (arena == nullptr) and carves, so sizes and layout cannot disagree. T: with the
// sequence-parallel padding.
size_t GpuTransformer::layout_forward(int T, int S, int full_T, Arena* arena, bool for_backward) {
  const int64_t C = c_.hidden_size, L = c_.num_hidden_layers, Tl = local_rows(T);
  size_t total = 0;
  auto take = [&](size_t bytes, const char* what) -> char* {
    total += (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
    return arena ? static_cast<char*>(arena->alloc_bytes(bytes, what)) : nullptr;
  };
  tokens_ = reinterpret_cast<int32_t*>(take(size_t(T) * 4, "tokens"));
  positions_ = reinterpret_cast<int32_t*>(take(size_t(T) * 4, "positions"));
  targets_ = reinterpret_cast<int32_t*>(take(size_t(T) * 4, "targets"));
  cu_seqlens_ = reinterpret_cast<int32_t*>(take(size_t(S + 1) * 4, "cu_seqlens"));
  const int b = span_.layer_begin, e = span_.layer_end;
  x_.assign(size_t(L + 1), nullptr);  // the span's streams only: its input, then each of its layers' outputs
  for (int l = b; l <= e; ++l)
    x_[size_t(l)] = reinterpret_cast<bf16*>(take(size_t(Tl * C) * sizeof(bf16), "residual stream"));
  saved_.assign(size_t(L), LayerActivations<CudaBackend>{});
  LayerActivations<CudaBackend> probe;
  const size_t per_layer = carve_layer_activations(probe, nullptr, shape_, T, int(Tl));
  // Without a backward to follow, no layer keeps its activations: all share the one scratch. A selective layer
  // keeps its GEMM and attention outputs and recomputes the rest into the scratch (model/recompute.h).
  auto kept = [&](int l) { return for_backward ? recompute_[size_t(l)] : Recompute::full; };
  bool any_shared = false, any_selective = false;
  for (int l = b; l < e; ++l) {
    any_shared = any_shared || kept(l) != Recompute::none;
    any_selective = any_selective || kept(l) == Recompute::selective;
  }
  // The selective rerun works on whole token rows; read_grpo_settings refuses it with sequence parallelism.
  HONE_CHECK(!arena || !any_selective || Tl == T, "selective recompute under sequence parallelism");
  LayerActivations<CudaBackend> scratch;
  if (any_shared) carve_layer_activations(scratch, take(per_layer, "recompute scratch"), shape_, T, int(Tl));
  const size_t selective = carve_selective_activations(probe, nullptr, scratch, shape_, T, int(Tl));
  for (int l = b; l < e; ++l) {
    LayerActivations<CudaBackend>& a = saved_[size_t(l)];
    switch (kept(l)) {
      case Recompute::none:
        carve_layer_activations(a, take(per_layer, "layer activations"), shape_, T, int(Tl));
        break;
      case Recompute::selective:
        carve_selective_activations(a, take(selective, "layer activations (selective)"), scratch, shape_, T, int(Tl));
        break;
      case Recompute::full: a = scratch; break;
    }
  }
  if (Tl != T) {  // sequence parallelism: every layer's gathered rows in one shared place
    LayerActivations<CudaBackend> gathered;
    carve_gathered_rows(gathered, take(carve_gathered_rows(gathered, nullptr, shape_, T), "gathered rows"),
                            shape_, T);
    for (int l = b; l < e; ++l) saved_[size_t(l)].h1 = gathered.h1, saved_[size_t(l)].h2 = gathered.h2;
  }
  const size_t fs = carve_layer_forward_scratch(fscratch_, nullptr, shape_, T, int(Tl));
  carve_layer_forward_scratch(fscratch_, take(fs, "forward scratch"), shape_, T, int(Tl));
  logprob_all_ = entropy_all_ = dlogprob_local_ = dentropy_local_ = nullptr;
  kept_logits_ = nullptr;
  if (!span_.head) {
    rstd_f_ = lse_f_ = logprob_ = entropy_ = nullptr;
    h_f_ = h_f_local_ = nullptr;
    return total;
  }
  rstd_f_ = reinterpret_cast<float*>(take(size_t(Tl) * 4, "final rstd"));
  h_f_ = reinterpret_cast<bf16*>(take(size_t(T * C) * sizeof(bf16), "final norm output"));
  h_f_local_ = Tl != T ? reinterpret_cast<bf16*>(take(size_t(Tl * C) * sizeof(bf16), "final norm rows")) : h_f_;
  lse_f_ = reinterpret_cast<float*>(take(size_t(T) * 4, "lm head lse"));
  kept_logits_ = keeps_logits(for_backward)
                     ? take(cuda::lm_head_saved_bytes(T, c_.vocab_size, chunk_v_), "lm head kept logits")
                     : nullptr;
  logprob_ = reinterpret_cast<float*>(take(size_t(T) * 4, "logprobs"));
  entropy_ = reinterpret_cast<float*>(take(size_t(T) * 4, "entropy"));
  if (cp_) {
    logprob_all_ = reinterpret_cast<float*>(take(size_t(full_T) * 4, "logprobs of the caller's rows"));
    entropy_all_ = reinterpret_cast<float*>(take(size_t(full_T) * 4, "entropy of the caller's rows"));
    dlogprob_local_ = reinterpret_cast<float*>(take(size_t(T) * 4, "logprob gradients of this rank's rows"));
    dentropy_local_ = reinterpret_cast<float*>(take(size_t(T) * 4, "entropy gradients of this rank's rows"));
  }
  return total;
}

// Counts what backward() takes from its arena, in the same order.
size_t GpuTransformer::layout_backward(int T, Arena* arena) {
  size_t total = 0;
  auto take = [&](size_t bytes, const char* what) -> char* {
    total += (bytes + Arena::kAlignment - 1) / Arena::kAlignment * Arena::kAlignment;
    return arena ? static_cast<char*>(arena->alloc_bytes(bytes, what)) : nullptr;
  };
  const int Tl = local_rows(T);
  const size_t TlC = size_t(Tl) * size_t(c_.hidden_size) * sizeof(bf16);
  take(TlC, "dres");
  take(TlC, "dh final");
  if (Tl != T) take(2 * size_t(T) * sizeof(float), "padded token gradients");
  LayerScratch<CudaBackend> s;
  take(carve_layer_backward_scratch(s, nullptr, shape_, T, Tl), "layer gradient scratch");
  return total;
}

size_t GpuTransformer::forward_bytes(int T, bool for_backward) const {
  // layout_forward writes the pointer members; save and restore them so a size query leaves the layout alone.
  GpuTransformer& self = const_cast<GpuTransformer&>(*this);
  const auto keep_x = x_;
  const auto keep_saved = saved_;
  const LayerScratch<CudaBackend> keep_s = fscratch_;
  int32_t* keep_i[4] = {tokens_, positions_, targets_, cu_seqlens_};
  float* keep_f[8] = {rstd_f_, lse_f_, logprob_, entropy_, logprob_all_, entropy_all_, dlogprob_local_, dentropy_local_};
  void* keep_kept = kept_logits_;
  bf16* keep_h = h_f_, *keep_hl = h_f_local_;
  const int Tp = padded_tokens(T);
  // The caller's rows of a batch whose split gives T rows here: at most cp x T.
  const size_t n = self.layout_forward(Tp, Tp, cp_ ? T * cp_->size() : T, nullptr, for_backward);
  self.x_ = keep_x;
  self.saved_ = keep_saved;
  self.fscratch_ = keep_s;
  self.tokens_ = keep_i[0], self.positions_ = keep_i[1], self.targets_ = keep_i[2], self.cu_seqlens_ = keep_i[3];
  self.rstd_f_ = keep_f[0], self.lse_f_ = keep_f[1], self.logprob_ = keep_f[2], self.entropy_ = keep_f[3];
  self.logprob_all_ = keep_f[4], self.entropy_all_ = keep_f[5], self.dlogprob_local_ = keep_f[6];
  self.dentropy_local_ = keep_f[7];
  self.h_f_ = keep_h, self.h_f_local_ = keep_hl;
  self.kept_logits_ = keep_kept;
  return n;
}

size_t GpuTransformer::backward_bytes(int T) const {
  return const_cast<GpuTransformer&>(*this).layout_backward(padded_tokens(T), nullptr);
}

size_t GpuTransformer::training_bytes(int T, Recompute r) const {
  GpuTransformer& self = const_cast<GpuTransformer&>(*this);
  const std::vector<Recompute> keep = recompute_;
  self.recompute_.assign(keep.size(), r);
  const size_t n = forward_bytes(T, true) + backward_bytes(T);
  self.recompute_ = keep;
  return n + (cp_ ? GpuRingAttention::scratch_bytes(shape_, T) : 0);
}

// A model that only ever runs forward passes (the frozen reference, a logprob-only pass) gets the small layout of
// one shared layer scratch and no backward arena; once a forward needs backward, the model keeps the training
// layout (the logprob pass of the policy then reuses the training arena).
void GpuTransformer::ensure_arenas(int T, bool for_backward) {
  if (fwd_ && !arenas_stale_ && T <= arena_tokens_ && (arena_backward_ || !for_backward)) return;
  const int tokens = std::max(T, arena_tokens_);
  const bool backward = arena_backward_ || for_backward;
  backward_ready_ = false;
  fwd_.reset();
  bwd_.reset();
  fwd_ = std::make_unique<Arena>("gpu forward activations", forward_bytes(tokens, backward), cuda::device_arena_allocator());
  if (backward)
    bwd_ = std::make_unique<Arena>("gpu backward scratch", backward_bytes(tokens), cuda::device_arena_allocator());
  arena_tokens_ = tokens;
  arena_backward_ = backward;
  arenas_stale_ = false;
}

void GpuTransformer::reset_peaks() {
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
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

void GpuTransformer::release_arenas() {
  feed_forward_->release(exec());
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  backward_ready_ = false;
  have_output_ = false;
  fwd_.reset();
  bwd_.reset();
  if (ring_) ring_->release();
}

GpuMoeFeedForward* GpuTransformer::moe() const { return dynamic_cast<GpuMoeFeedForward*>(feed_forward_.get()); }

size_t GpuTransformer::device_bytes_in_use() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

LayerBatch GpuTransformer::layer_batch() const {
  return LayerBatch{positions_, cu_seqlens_, T_, batch_.num_seqs(), max_seqlen_, inv_freq_.get()};
}

void GpuTransformer::forward(const PackedBatch& batch, float temperature, bool need_entropy, bool need_backward,
                             const bf16* input) {
  const int Tc = batch.num_tokens(), C = c_.hidden_size, V = c_.vocab_size, L = c_.num_hidden_layers;
  HONE_CHECK(Tc > 0 && batch.num_seqs() > 0 && batch.cu_seqlens.back() == Tc, "malformed packed batch");
  HONE_CHECK(int(batch.positions.size()) == Tc && int(batch.targets.size()) == Tc, "malformed packed batch");
  HONE_CHECK(!cp_ || (span_.embedding && span_.head), "context parallelism runs the whole model, not a span");
  HONE_CHECK(temperature > 0.f, "temperature must be positive, got ", temperature);
  for (int t = 0; t < Tc; ++t) {
    HONE_CHECK(batch.tokens[size_t(t)] >= 0 && batch.tokens[size_t(t)] < V, "token id ", batch.tokens[size_t(t)],
               " out of the vocabulary [0, ", V, ")");
    HONE_CHECK(batch.targets[size_t(t)] < V, "target id ", batch.targets[size_t(t)], " out of the vocabulary");
  }

  // The previous batch's uploads may still be in flight from batch_ (and the split's arrays); wait before
  // overwriting the host copies.
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  batch_ = cp_ ? cp_->split(batch).local : batch;  // under cp: this rank's rows
  const int T = batch_.num_tokens();
  int max_seqlen = 0;
  for (int s = 0; s < batch_.num_seqs(); ++s)
    max_seqlen = std::max(max_seqlen, batch_.seq_end(s) - batch_.seq_begin(s));
  T_caller_ = Tc;
  T_batch_ = T;
  pad_for_sequence_parallelism();
  T_ = batch_.num_tokens();
  max_seqlen_ = std::max(max_seqlen, T_ - T);  // the padding sequence
  temperature_ = temperature;
  have_entropy_ = need_entropy;
  ensure_arenas(T, need_backward);
  fwd_->reset();
  if (bwd_) bwd_->reset();
  layout_forward(T_, batch_.num_seqs(), Tc, fwd_.get(), need_backward);

  auto upload = [&](int32_t* dst, const std::vector<int32_t>& src) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(int32_t), cudaMemcpyHostToDevice, ctx_.stream));
  };
  upload(tokens_, batch_.tokens);
  upload(positions_, batch_.positions);
  upload(targets_, batch_.targets);
  upload(cu_seqlens_, batch_.cu_seqlens);

  HONE_CHECK(span_.embedding || input, "a span without the embedding needs the previous chunk's hidden state");
  const LayerBatch lb = layer_batch();
  const bf16* w = w_;
  const int Tp = T_, Tl = local_rows(Tp);  // with the padding; this rank's rows
  const bool sp = Tl != Tp;
  dres_ = nullptr;
  have_output_ = false;
  bf16* x0 = x_[size_t(span_.layer_begin)];
  if (!span_.embedding) {  // the previous chunk's output: this rank's rows of the residual stream
    CUDA_CHECK(cudaMemcpyAsync(x0, input, size_t(Tl) * size_t(C) * sizeof(bf16), cudaMemcpyDeviceToDevice,
                               ctx_.stream));
  } else {
    ProfileScope ps(prof_, "embedding");
    if (tp_) tp_->embedding_forward(x0, tokens_, w + layout_.embed_tokens, Tp, sp);
    else cuda::embedding_forward(x0, tokens_, w + layout_.embed_tokens, T, C, ctx_);
  }
  for (int l = span_.layer_begin; l < span_.layer_end; ++l) {
    LayerActivations<CudaBackend>& a = saved_[size_t(l)];
    a.x_in = x_[size_t(l)];
    layer_forward<CudaBackend>(l, shape_, layer_pointers<const bf16>(layout_.layers[size_t(l)], w), lb, a, fscratch_,
                               attention(), feed_forward(), layers(), x_[size_t(l + 1)], exec());
  }
  if (!span_.head) {
    backward_ready_ = need_backward;
    have_output_ = true;
    return;
  }
  {
    ProfileScope ps(prof_, "rmsnorm");
    cuda::rmsnorm_forward(h_f_local_, rstd_f_, x_[size_t(L)], w + layout_.norm, Tl, C, c_.rms_norm_eps, ctx_);
    if (sp) tp_->gather_rows(h_f_local_, h_f_, Tp);
  }
  {
    ProfileScope ps(prof_, "lm_head");
    if (tp_)
      tp_->lm_head_forward(logprob_, need_entropy ? entropy_ : nullptr, lse_f_, h_f_, w + layout_.lm_head, targets_,
                           Tp, temperature, chunk_v_);
    else if (kept_logits_)  // laid out only for a forward with a backward to follow
      cuda::lm_head_saved_forward(logprob_, need_entropy ? entropy_ : nullptr, lse_f_, kept_logits_, h_f_,
                                  w + layout_.lm_head, targets_, T, C, V, temperature, chunk_v_, ctx_);
    else
      cuda::lm_head_logprob_forward(logprob_, need_entropy ? entropy_ : nullptr, lse_f_, h_f_, w + layout_.lm_head,
                                    targets_, T, C, V, temperature, chunk_v_, ctx_);
  }
  if (!need_entropy) CUDA_CHECK(cudaMemsetAsync(entropy_, 0, size_t(Tp) * sizeof(float), ctx_.stream));
  if (cp_) {  // every rank gets the values of all the caller's rows
    cp_->gather_rows(logprob_, logprob_all_);
    cp_->gather_rows(entropy_, entropy_all_);
  }
  backward_ready_ = need_backward;
}

std::vector<float> GpuTransformer::logprobs_host() const {
  std::vector<float> out(static_cast<size_t>(T_caller_));
  CUDA_CHECK(cudaMemcpyAsync(out.data(), logprobs(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return out;
}

std::vector<float> GpuTransformer::entropy_host() const {
  std::vector<float> out(static_cast<size_t>(T_caller_));
  CUDA_CHECK(cudaMemcpyAsync(out.data(), entropy(), out.size() * sizeof(float), cudaMemcpyDeviceToHost, ctx_.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  return out;
}

void GpuTransformer::backward_host(const std::vector<float>& dlogprob, const std::vector<float>* dentropy,
                                   float* grads) {
  const int T = T_caller_;
  HONE_CHECK(int(dlogprob.size()) == T && (!dentropy || int(dentropy->size()) == T),
             "backward weights must have one value per token of the last forward");
  // Staged in the forward arena's tail would disturb its layout; use a small temporary instead.
  DeviceArray<float> d(2 * int64_t(T));
  CUDA_CHECK(cudaMemcpyAsync(d.get(), dlogprob.data(), size_t(T) * 4, cudaMemcpyHostToDevice, ctx_.stream));
  if (dentropy)
    CUDA_CHECK(cudaMemcpyAsync(d.get() + T, dentropy->data(), size_t(T) * 4, cudaMemcpyHostToDevice, ctx_.stream));
  backward(d.get(), dentropy ? d.get() + T : nullptr, grads);
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // before d is freed
}

void GpuTransformer::backward(const float* dlogprob, const float* dentropy, float* grads, const bf16* output_grad) {
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
    cp_->take_local_rows(dlogprob, dlogprob_local_);
    dlogprob = dlogprob_local_;
    if (dentropy) {
      cp_->take_local_rows(dentropy, dentropy_local_);
      dentropy = dentropy_local_;
    }
  }

  // The arena in layout_backward's order.
  bwd_->reset();
  bf16* dres = static_cast<bf16*>(bwd_->alloc_bytes(TlC * sizeof(bf16), "dres"));
  bf16* dh_f = static_cast<bf16*>(bwd_->alloc_bytes(TlC * sizeof(bf16), "dh final"));
  if (sp && span_.head) {
    // The padding tokens get no gradient: the batch's rows are copied, only the padding rows after them zeroed.
    float* padded = static_cast<float*>(bwd_->alloc_bytes(2 * size_t(T) * sizeof(float), "padded token gradients"));
    const size_t pad_bytes = size_t(T - T_batch_) * sizeof(float);
    CUDA_CHECK(cudaMemcpyAsync(padded, dlogprob, size_t(T_batch_) * sizeof(float), cudaMemcpyDeviceToDevice,
                               ctx_.stream));
    CUDA_CHECK(cudaMemsetAsync(padded + T_batch_, 0, pad_bytes, ctx_.stream));
    dlogprob = padded;
    if (dentropy) {
      CUDA_CHECK(cudaMemcpyAsync(padded + T, dentropy, size_t(T_batch_) * sizeof(float), cudaMemcpyDeviceToDevice,
                                 ctx_.stream));
      CUDA_CHECK(cudaMemsetAsync(padded + T + T_batch_, 0, pad_bytes, ctx_.stream));
      dentropy = padded + T;
    }
  }
  LayerScratch<CudaBackend> s = fscratch_;  // the forward scratch (branch) serves recomputed layers
  const size_t scratch_bytes = carve_layer_backward_scratch(s, nullptr, shape_, T, Tl);
  carve_layer_backward_scratch(s, static_cast<char*>(bwd_->alloc_bytes(scratch_bytes, "layer gradient scratch")),
                                   shape_, T, Tl);

  const bf16* w = w_;
  if (!span_.head) {  // the next chunk's gradient of this span's output: this rank's rows
    CUDA_CHECK(cudaMemcpyAsync(dres, output_grad, TlC * sizeof(bf16), cudaMemcpyDeviceToDevice, ctx_.stream));
  } else {
    {  // the LM head's backward accumulates into dh_f; the final norm's backward writes dres (its first producer)
      ProfileScope ps(prof_, "memset");
      CUDA_CHECK(cudaMemsetAsync(dh_f, 0, TlC * sizeof(bf16), ctx_.stream));
    }
    {
      ProfileScope ps(prof_, "lm_head_backward");
      if (tp_)
        tp_->lm_head_backward(dh_f, grads + layout_.lm_head, dlogprob, dentropy, h_f_, w + layout_.lm_head, targets_,
                              lse_f_, have_entropy_ ? entropy_ : nullptr, T, temperature_, chunk_v_, sp);
      else if (kept_logits_)
        cuda::lm_head_saved_backward(dh_f, grads + layout_.lm_head, dlogprob, dentropy, h_f_, w + layout_.lm_head,
                                     targets_, lse_f_, have_entropy_ ? entropy_ : nullptr, kept_logits_, T, C, V,
                                     temperature_, chunk_v_, ctx_);
      else
        cuda::lm_head_logprob_backward(dh_f, grads + layout_.lm_head, dlogprob, dentropy, h_f_, w + layout_.lm_head,
                                       targets_, lse_f_, have_entropy_ ? entropy_ : nullptr, T, C, V, temperature_,
                                       chunk_v_, ctx_);
    }
    ProfileScope ps(prof_, "rmsnorm_backward");
    cuda::rmsnorm_backward(dres, grads + layout_.norm, dh_f, x_[size_t(L)], w + layout_.norm, rstd_f_, Tl, C,
                           /*accumulate=*/false, ctx_);
  }
  const LayerBatch lb = layer_batch();
  for (int l = span_.layer_end - 1; l >= span_.layer_begin; --l) {
    LayerActivations<CudaBackend> a = saved_[size_t(l)];
    a.x_in = x_[size_t(l)];
    const auto wl = layer_pointers<const bf16>(layout_.layers[size_t(l)], w);
    // A fully recomputed layer reruns its forward into the shared scratch; its output is rewritten with the same
    // values it had (the next layer's input, already consumed), so nothing downstream changes. A selective one
    // reruns only its elementwise ops from what it kept.
    if (recompute_[size_t(l)] == Recompute::full) {
      layer_forward<CudaBackend>(l, shape_, wl, lb, a, s, attention(), feed_forward(), layers(), x_[size_t(l + 1)],
                                 exec());
    } else if (recompute_[size_t(l)] == Recompute::selective) {
      ProfileScope ps(prof_, "recompute");
      recompute_selective_activations<CudaBackend>(shape_, wl, lb, a, Tl, exec());
    }
    layer_backward<CudaBackend>(l, shape_, wl, layer_pointers<float>(layout_.layers[size_t(l)], grads), lb, a, s,
                                attention(), feed_forward(), layers(), dres, exec());
    if (layer_hook_) layer_hook_(l);
  }
  dres_ = dres;
  if (span_.embedding) {
    ProfileScope ps(prof_, "embedding_backward");
    if (tp_) tp_->embedding_backward(grads + layout_.embed_tokens, dres, tokens_, T, sp);
    else cuda::embedding_backward(grads + layout_.embed_tokens, dres, tokens_, T, C, ctx_);
  }
  if (layer_hook_) layer_hook_(-1);
}

}  // namespace hone

#endif  // HONE_CUDA
