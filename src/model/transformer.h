// The decoder-only transformer (Llama, Qwen2, Qwen3, Qwen3-MoE) for the logprob and training phases, written once
// over a backend B (backend/backend.h): TransformerModel<CpuBackend> (Transformer) is the fp32 reference on the
// host, and TransformerModel<CudaBackend> (GpuTransformer) runs bf16 compute weights and activations on one GPU
// stream with fp32 statistics, logprobs and parameter gradients. Both run the same order of ops on the same saved
// activations:
//
//   embed -> L x [RMSNorm -> q,k,v (+bias) -> (q/k per-head RMSNorm) -> RoPE -> packed causal GQA attention
//                 -> o_proj -> +residual -> RMSNorm -> gate/up -> SwiGLU (or experts) -> down -> +residual]
//         -> RMSNorm -> LM head fused with logprob and entropy (vocabulary chunks; no [T, V] logits)
//
// The compute weights are one flat buffer in a ParamLayout (model/param_table.h); the gradients backward
// accumulates are fp32 in the same layout (a tied lm_head's land in embed_tokens). Activations live in a forward
// arena sized for the largest micro-batch so far, backward's scratch in a backward arena; both are carved by one
// function that also counts them, so the memory planner's numbers are the arenas' (carve_forward below).
//
// Per-layer activation recompute (model/layer_recompute.h): a fully recomputed layer keeps only its input and reruns
// its forward into a shared scratch during backward, a selective one keeps its GEMM and attention outputs and reruns
// the elementwise ops between them (bitwise the same results, less memory). See doc/model-engine.md.
//
// A pipeline chunk (model/model_span.h) runs a span of the layers: without the embedding it starts from the hidden
// state the previous chunk sent (forward's input), without the head it ends with the hidden state it hands on
// (output()); its backward then takes the gradient of that output and leaves the gradient of its input
// (input_grad()). Several models may share one weight buffer: each holds one micro-batch's activations.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/model_span.h"
#include "model/packed_batch.h"
#include "model/param_table.h"
#include "model/recompute.h"
#include "model/transformer_layer.h"
#include "model/weights.h"
#include "tensor/arena.h"

namespace hone {

class GpuOpProfiler;
template <typename B>
class ContextParallelGroup;
template <typename B>
class RingAttention;
template <typename B>
class ExpertParallelGroup;
template <typename B>
class TensorParallelGroup;
template <typename B>
class MoeFeedForward;

// What the forward arena holds for one pass, as pointers carved from it (carve_forward).
template <typename B>
struct ForwardRegions {
  using A = typename B::Act;
  int32_t* tokens = nullptr, *positions = nullptr, *targets = nullptr, *cu_seqlens = nullptr;
  std::vector<A*> x;                             // L+1 residual streams [local rows, C]: the span's only
  std::vector<LayerActivations<B>> saved;        // per layer; recomputed layers point into the shared scratch
  LayerScratch<B> fscratch;                      // the layers' forward scratch (o_proj / down_proj outputs)
  float* rstd_f = nullptr;                       // final RMSNorm [local rows]
  A* h_f = nullptr;                              // [T, C]
  A* h_f_local = nullptr;                        // [local rows, C] (h_f itself without sequence parallelism)
  float* lse_f = nullptr;                        // LM head log-sum-exp [T]
  void* kept_logits = nullptr;                   // the LM head's kept logits, or null
  float* logprob = nullptr, *entropy = nullptr;  // [T]
  // Context parallelism: the caller's rows gathered from every rank, and this rank's rows of the caller's gradients.
  float* logprob_all = nullptr, *entropy_all = nullptr;
  float* dlogprob_local = nullptr, *dentropy_local = nullptr;
};

// The shape of one pass's forward arena.
struct ForwardPlan {
  int T = 0;          // rows run (with the sequence-parallel padding)
  int S = 0;          // sequences (with the padding sequence)
  int local_rows = 0; // rows of the residual stream on this rank
  int caller_rows = 0;  // the caller's rows (context parallelism gathers them)
  ModelSpan span;     // resolved
  std::vector<Recompute> kept;  // per layer: what it keeps (full for every layer of a pass without backward)
  bool keep_logits = false;     // the LM head keeps its logits (B::lm_head_saved_forward)
  bool context_parallel = false;
  int chunk_v = 8192;
};

// Carves the forward arena of plan p for config c and this rank's shape s from base (nullptr: counts only), in one
// order for counting and carving; returns the bytes.
template <typename B>
size_t carve_forward(ForwardRegions<B>& r, char* base, const ModelConfig& c, const LayerShape& s,
                     const ForwardPlan& p);
// The backward arena of T rows (local_rows of them on this rank): the residual gradient, the final norm's input
// gradient, the padded token gradients under sequence parallelism, the layers' gradient scratch.
template <typename B>
size_t backward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows);

template <typename B>
class TransformerModel {
 public:
  using A = typename B::Act;
  using Exec = typename B::Exec;
  using TensorParallel = TensorParallelGroup<B>;
  using ContextParallel = ContextParallelGroup<B>;
  using ExpertParallel = ExpertParallelGroup<B>;

  // layout: the flat compute weights' (this rank's shard: tp->layout().param_layout() under tensor parallelism,
  // ep->layout()'s under expert parallelism). exec: where the ops run (the GPU context must outlive the model).
  // max_tokens: the largest micro-batch expected (the arenas grow if a larger one comes).
  // With tp (which must outlive the model) the layers compute this rank's heads and feed-forward slice, the embedding
  // and LM head its vocabulary slice, and every rank gets the whole model's logprobs and entropies; forward and
  // backward are collective over the group and the gradients of parameters several ranks hold stay partial (until
  // tp->sum_partial_gradients). Under sequence parallelism the residual stream holds this rank's rows, and a batch
  // that tp does not divide runs with a few padding tokens (a short sequence of token 0 without targets) the caller
  // never sees. With span, only its layers (and the embedding / head when it has them) run. With shared_weights the
  // model reads that buffer ([layout.num_params], owned by the caller, who may move it: set_shared_weights) instead
  // of allocating its own. With cp (outlives the model) each batch is split over the context-parallel group: this
  // rank runs its rows (attention by the ring), logprobs()/entropy() hold all the caller's rows, and backward takes
  // the gradients of all of them and leaves this rank's share of the parameter gradients (summed over the group by
  // the optimizer); cp runs the whole model. With ep (a mixture of experts under expert parallelism; outlives the
  // model) the layout holds this rank's experts and forward and backward are collective over the group.
  TransformerModel(const ModelConfig& config, const ParamLayout& layout, Exec exec, int max_tokens,
              TensorParallel* tp = nullptr, ModelSpan span = {}, A* shared_weights = nullptr,
              ContextParallel* cp = nullptr, ExpertParallel* ep = nullptr);
  // The CPU over host weights (which must outlive the model and may change between calls: forward reads their
  // current values): their own layout, shared.
  TransformerModel(const ModelConfig& config, const ModelWeights& weights, TensorParallel* tp = nullptr,
              ModelSpan span = {}, ContextParallel* cp = nullptr, ExpertParallel* ep = nullptr)
    requires std::is_same_v<B, CpuBackend>;
  ~TransformerModel();
  TransformerModel(const TransformerModel&) = delete;
  TransformerModel& operator=(const TransformerModel&) = delete;

  // The compute weights, [num_params].
  A* weights() const { return w_; }
  void set_shared_weights(A* w);  // a model built with shared weights: their new place
  const ModelSpan& span() const { return span_; }
  const ParamLayout& layout() const { return layout_; }
  // Host fp32 weights (same layout) -> the compute weights.
  void upload_weights(const ModelWeights& w);

  // Activation recompute (model/recompute.h), every layer or one.
  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  void set_layer_recompute(int layer, Recompute r);
  void set_layer_recompute(int layer, bool on) { set_layer_recompute(layer, on ? Recompute::full : Recompute::none); }
  Recompute layer_recompute(int layer) const { return recompute_[size_t(layer)]; }
  // Whether a training forward without recompute keeps the LM head's logits for its backward (keeps_logits; the
  // backend's default, B::kKeepLogits). Off, the backward forms them again as under recompute: the same logprobs,
  // gradients within the compute type's rounding.
  void set_keep_logits(bool on) {
    keep_logits_ = on;
    arenas_stale_ = true;
  }
  void set_vocab_chunk(int chunk_v) {
    chunk_v_ = chunk_v;
    arenas_stale_ = true;  // the kept logits' size depends on it
  }
  void set_profiler(GpuOpProfiler* p);  // per-op timing on the GPU (null: none); nothing on the CPU
  // The mixture-of-experts feed-forward of an MoE model (what its last pass routed: loads, the load-balancing loss);
  // null for a dense model.
  MoeFeedForward<B>* moe() const;

  // Runs the batch (copied; positions, targets and cu_seqlens as packed); asynchronous on the GPU's stream. After it
  // logprobs() and entropy() hold fp32 [T] values in the backend's memory (0 where targets < 0; entropy 0 everywhere
  // without need_entropy) until the next forward. Token ids must be in [0, vocab_size). With need_backward false
  // (the logprob phase) no layer keeps its activations (one shared scratch) and backward is refused. A span without
  // the embedding reads its hidden state from `input` ([boundary_rows(T), C]: this rank's rows of the residual
  // stream) instead of the tokens. routing: a mixture of experts' replay, record and load-balancing weight for this
  // pass (model/transformer_layer.h; the tables in the backend's memory, valid until the pass's backward returns),
  // which its backward and a layer recomputed there use too.
  void forward(const PackedBatch& batch, float temperature = 1.f, bool need_entropy = true,
               bool need_backward = true, const A* input = nullptr, const MoeRouting& routing = {});
  // The input in need_backward's place would convert to a bool: refused.
  void forward(const PackedBatch&, float, bool, const A*) = delete;
  // A span without the head: its hidden state [boundary_rows(T), C] after the last forward.
  const A* output() const;
  // Rows of the hidden state a span hands on for a batch of T tokens: T, or under sequence parallelism this rank's
  // rows of T padded to a multiple of tp; the same for a model on tp (null: tp = 1) before any model exists.
  int boundary_rows(int T) const { return boundary_rows(tp_, T); }
  static int boundary_rows(const TensorParallel* tp, int T);
  const float* logprobs() const { return cp_ ? f_.logprob_all : f_.logprob; }
  const float* entropy() const { return cp_ ? f_.entropy_all : f_.entropy; }
  std::vector<float> logprobs_host() const;  // waits for the forward
  std::vector<float> entropy_host() const;
  int num_tokens() const { return T_caller_; }  // of the caller's batch

  // Gradient of sum_t dlogprob[t] logprob[t] + dentropy[t] entropy[t] (fp32 [T] in the backend's memory; dentropy may
  // be null), ACCUMULATED into grads (fp32 [num_params], the layout's offsets). Once per forward. A span without the
  // head takes the gradient of its output (output_grad, [boundary_rows(T), C]) instead of dlogprob and dentropy.
  void backward(const float* dlogprob, const float* dentropy, float* grads, const A* output_grad = nullptr);
  // The same into host gradients shaped like the weights (allocate_weights of the same layout).
  void backward(const float* dlogprob, const float* dentropy, ModelWeights& grads, const A* output_grad = nullptr);
  // The same with host dlogprob / dentropy.
  void backward_host(const std::vector<float>& dlogprob, const std::vector<float>* dentropy, float* grads);
  // A span without the embedding: the gradient of its input [boundary_rows(T), C] after the last backward.
  const A* input_grad() const;
  // Called on the host during backward once layer l's parameter gradients are final (l = L-1 down to 0), and with
  // l = -1 once every gradient is (embeddings; the final norm and an untied LM head are final before layer L-1's
  // call). For overlapping gradient reduction (train/grad_reducer.h); null: none.
  void set_backward_layer_hook(std::function<void(int layer)> hook) { layer_hook_ = std::move(hook); }

  // Arena bytes: reserved, and the peak used since the last reset_peaks() (which drops the last forward's
  // activations: backward is refused until the next forward).
  size_t forward_arena_capacity() const { return fwd_ ? fwd_->capacity() : 0; }
  size_t backward_arena_capacity() const { return bwd_ ? bwd_->capacity() : 0; }
  size_t forward_arena_peak() const { return fwd_ ? fwd_->peak() : 0; }
  size_t backward_arena_peak() const { return bwd_ ? bwd_->peak() : 0; }
  size_t allocated_bytes() const { return forward_arena_capacity() + backward_arena_capacity(); }
  void reset_peaks();
  // Frees both arenas and the ring attention's buffers (colocation: the KV cache of generation takes the memory);
  // the next forward allocates them again at the size they had.
  void release_arenas();
  // Bytes the forward and backward arenas need for T tokens of this rank's rows with the current recompute
  // settings (the forward arena of a model that runs no backward is smaller: for_backward = false), sequence
  // parallelism's padding included.
  size_t forward_bytes(int T, bool for_backward = true) const;
  size_t backward_bytes(int T) const;
  // Bytes of a training micro-batch of T rows of this rank with every layer at recompute r: both arenas and, under
  // context parallelism, the ring's buffers (the memory planner's count).
  size_t training_bytes(int T, Recompute r) const;
  // The same before any model exists (the host memory planner): a whole model's arenas for T tokens of which this
  // rank holds local_rows, every layer at recompute r (reference: a forward without backward).
  static size_t planned_forward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows, Recompute r,
                                      bool for_backward = true);
  static size_t planned_backward_bytes(const ModelConfig& c, const LayerShape& s, int T, int local_rows);
  // What one layer saves for T tokens (the layer input excluded; without sequence parallelism).
  static size_t layer_activation_bytes(const LayerShape& s, int T);
  // This rank's rows of a micro-batch of `tokens` tokens in one sequence (tokens / cp, padded; tokens without cp).
  int local_tokens(int tokens) const;

 private:
  ForwardPlan plan(int T, int S, int caller_rows, bool for_backward) const;
  void ensure_arenas(int T, bool for_backward);
  // The pass's batch as the layers see it; in backward without the routing record (a recomputed layer writes none).
  LayerBatch layer_batch(bool for_backward) const;
  LayerAttention<B>& attention();      // packed, or the ring under cp
  LayerFeedForward<B>& feed_forward();  // the config's
  // Whether a training forward keeps the LM head's logits for its backward: with the whole vocabulary on this rank,
  // no layer recomputed (recompute trades memory for time; the kept logits are the largest activation of a small
  // model) and set_keep_logits on.
  bool keeps_logits(bool for_backward) const;
  int padded_tokens(int T) const;  // T rounded up to a multiple of tp under sequence parallelism
  int local_rows(int T) const;     // rows of the residual stream on this rank
  int split_multiple() const;      // the local rows of a context-parallel split are a multiple of it
  LayerCollectives<A>* layers() const;  // the layer hooks (null at tp = 1)
  void pad_for_sequence_parallelism();

  const ModelConfig c_;
  TensorParallel* tp_ = nullptr;
  ContextParallel* cp_ = nullptr;
  std::unique_ptr<RingAttention<B>> ring_;  // cp only
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ParamLayout layout_;
  Exec exec_;
  const ModelSpan span_;  // resolved
  std::vector<Recompute> recompute_;
  int chunk_v_ = 8192;
  bool keep_logits_ = B::kKeepLogits;
  std::function<void(int)> layer_hook_;
  PackedAttention<B> attention_;
  std::unique_ptr<LayerFeedForward<B>> feed_forward_;

  typename B::template Array<A> weights_;  // owned (empty with shared weights)
  A* w_ = nullptr;                         // what the model reads: weights_ or the shared buffer
  typename B::template Array<float> inv_freq_;
  std::unique_ptr<Arena> fwd_, bwd_;
  int arena_tokens_ = 0;
  bool arena_backward_ = false;  // the arenas hold the training layout
  bool arenas_stale_ = false;

  PackedBatch batch_;  // host copy (the backend's copies are in the forward arena), with the padding
  int T_ = 0, max_seqlen_ = 0;
  int T_caller_ = 0;  // the caller's rows (T_batch_ but under context parallelism)
  int T_batch_ = 0;   // this rank's rows of the caller's batch (T_ without the sequence-parallel padding)
  float temperature_ = 1.f;
  bool have_entropy_ = false;
  MoeRouting routing_;  // the last forward's
  bool backward_ready_ = false;
  bool have_output_ = false;  // a span without the head ran its forward: output() is valid

  ForwardRegions<B> f_;  // the forward arena's contents
  A* dres_ = nullptr;    // the backward's residual gradient: at its end, the input's
};

// The engines' names for the two instantiations.
using Transformer = TransformerModel<CpuBackend>;
using GpuTransformer = TransformerModel<CudaBackend>;

}  // namespace hone
