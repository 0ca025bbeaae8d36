// The decoder-only transformer on one GPU for the logprob and training phases: bf16 compute weights in one flat
// device buffer (the allocate_weights layout), bf16 activations in a device arena sized for the largest
// micro-batch, fp32 logprobs/entropy, and a backward that accumulates fp32 parameter gradients into a flat device
// buffer of the same layout (a tied lm_head's gradient lands in embed_tokens). The device twin of
// model/transformer.h: same PackedBatch, same order of ops, same saved activations, same recompute switch, and the
// same pipeline spans (model/model_span.h): a chunk without the embedding starts from a received bf16 hidden state,
// one without the head hands its hidden state on and takes back its gradient. Several GpuTransformers may share
// one weight buffer (the pipeline's pool of in-flight micro-batches: each holds one micro-batch's activations).
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "backend/cuda_backend.h"
#include "model/transformer_layer.h"
#include "model/recompute.h"
#include "model/model_config.h"
#include "model/model_span.h"
#include "model/packed_batch.h"
#include "model/weights.h"
#include "tensor/arena.h"

namespace hone {

class GpuExpertParallel;
class GpuMoeFeedForward;
class GpuOpProfiler;
class GpuTensorParallel;
class GpuContextParallel;
class GpuRingAttention;

// Host fp32 weights -> n device bf16 values at dst, through a bounded fp32 staging buffer (returns when done).
void upload_bf16(const ModelWeights& w, bf16* dst, int64_t n, const cuda::GpuContext& ctx);

class GpuTransformer {
 public:
  // max_tokens: the largest micro-batch expected (the arenas grow if a larger one comes). The context must
  // outlive the GpuTransformer. With tp (which must outlive it; parallel/gpu_tensor_parallel.h) the model is this
  // rank's shard: layout is tp->layout().param_layout(), forward and backward are collective over the group and
  // every rank gets the whole model's logprobs; the gradients of parameters several ranks hold stay partial. Under
  // the group's sequence parallelism the residual stream holds this rank's rows, and a batch that tp does not
  // divide runs with a few padding tokens (a short sequence of token 0 without targets) the caller never sees.
  // every rank gets the whole model's logprobs; the gradients of parameters several ranks hold stay partial.
  // With span, only its layers (and the embedding / head when it has them) run; with shared_weights the model reads
  // that device buffer ([layout.num_params] bf16, owned by the caller, who may move it: set_shared_weights) instead
  // of allocating its own. With cp (which must outlive it; parallel/gpu_context_parallel.h) each batch is split over
  // the context-parallel group: this rank runs its rows (attention by the ring, parallel/gpu_ring_attention.h),
  // logprobs()/entropy() hold all the caller's rows, backward takes the gradients of all of them and leaves this
  // rank's share of the parameter gradients (summed over the group by the optimizer). cp needs the whole model.
  // With ep (a mixture of experts under expert parallelism; outlives it) the layout holds this rank's experts and
  // forward and backward are collective over the expert-parallel group.
  GpuTransformer(const ModelConfig& config, const ParamLayout& layout, const cuda::GpuContext& ctx,
                 int max_tokens, GpuTensorParallel* tp = nullptr, ModelSpan span = {},
                 bf16* shared_weights = nullptr, GpuContextParallel* cp = nullptr, GpuExpertParallel* ep = nullptr);
  ~GpuTransformer();

  // The bf16 compute weights, [num_params] on the device.
  bf16* weights() const { return w_; }
  void set_shared_weights(bf16* w);  // a model built with shared weights: their new place
  const ModelSpan& span() const { return span_; }
  const ParamLayout& layout() const { return layout_; }
  // Host fp32 weights (same layout) -> device bf16, through a bounded fp32 staging buffer.
  void upload_weights(const ModelWeights& w);

  // Activation recompute (model/recompute.h), every layer or one.
  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  void set_layer_recompute(int layer, Recompute r);
  void set_layer_recompute(int layer, bool on) { set_layer_recompute(layer, on ? Recompute::full : Recompute::none); }
  Recompute layer_recompute(int layer) const { return recompute_[size_t(layer)]; }
  // Whether a training forward without recompute keeps the LM head's logits for its backward (keeps_logits; on
  // by default). Off, the backward recomputes them as under recompute: the same logprobs, gradients within bf16
  // rounding (its dlogits are rounded from logits formed again in fp32 instead of kept in fp16).
  void set_keep_logits(bool on) {
    keep_logits_ = on;
    arenas_stale_ = true;
  }
  void set_vocab_chunk(int chunk_v) {
    chunk_v_ = chunk_v;
    arenas_stale_ = true;  // the kept logits' size depends on it
  }
  void set_profiler(GpuOpProfiler* p) { prof_ = p; }  // null: no per-op timing
  // The mixture-of-experts feed-forward of an MoE model (its routing, the load-balancing loss and its weight,
  // replay and the routing record: model/gpu_moe_feed_forward.h); null for a dense one.
  GpuMoeFeedForward* moe() const;

  // As Transformer::forward; asynchronous on the context's stream. logprobs()/entropy() are device [T] fp32
  // (0 where targets < 0; entropy 0 everywhere without need_entropy) until the next forward. With need_backward
  // false (the logprob phase) no layer keeps its activations (one shared scratch) and backward is refused.
  // A span without the embedding reads its hidden state from `input` (device bf16 [boundary_rows(T), C]: this
  // rank's rows of the residual stream) instead of the tokens.
  void forward(const PackedBatch& batch, float temperature = 1.f, bool need_entropy = true,
               bool need_backward = true, const bf16* input = nullptr);
  // A span without the head: its hidden state [boundary_rows(T), C] after the last forward (device bf16).
  const bf16* output() const;
  // Rows of the hidden state a span hands on for a batch of T tokens: T, or under sequence parallelism this rank's
  // rows of T padded to a multiple of tp (as the CPU Transformer's).
  int boundary_rows(int T) const;
  // The same for a model on tp (null: tp = 1), before any model exists (a pipeline stage's first receive).
  static int boundary_rows(const GpuTensorParallel* tp, int T);
  const float* logprobs() const { return cp_ ? logprob_all_ : logprob_; }
  const float* entropy() const { return cp_ ? entropy_all_ : entropy_; }
  std::vector<float> logprobs_host() const;  // synchronizes the stream
  std::vector<float> entropy_host() const;
  int num_tokens() const { return T_caller_; }  // of the caller's batch

  // Gradient of sum_t dlogprob[t] logprob[t] + dentropy[t] entropy[t] (device fp32 [T]; dentropy may be null),
  // ACCUMULATED into grads (device fp32 [num_params], the layout's offsets). Once per forward. A span without the
  // head takes the gradient of its output (output_grad, device bf16 [boundary_rows(T), C]) instead of dlogprob and
  // dentropy.
  void backward(const float* dlogprob, const float* dentropy, float* grads, const bf16* output_grad = nullptr);
  // A span without the embedding: the gradient of its input [boundary_rows(T), C] after the last backward.
  const bf16* input_grad() const;
  // Called on the host during backward once layer l's parameter gradients are final on the stream (l = L-1 down
  // to 0), and with l = -1 once every gradient is (embeddings; the final norm and an untied LM head are final
  // before layer L-1's call). For overlapping gradient reduction (train/grad_reducer.h); null: none.
  void set_backward_layer_hook(std::function<void(int layer)> hook) { layer_hook_ = std::move(hook); }
  // The same with host weights (uploaded into the backward arena).
  void backward_host(const std::vector<float>& dlogprob, const std::vector<float>* dentropy, float* grads);

  // Arena bytes: reserved, and the peak used since the last reset_peaks() (which drops the last forward's
  // activations: backward is refused until the next forward).
  size_t forward_arena_capacity() const { return fwd_ ? fwd_->capacity() : 0; }
  size_t backward_arena_capacity() const { return bwd_ ? bwd_->capacity() : 0; }
  size_t forward_arena_peak() const { return fwd_ ? fwd_->peak() : 0; }
  size_t backward_arena_peak() const { return bwd_ ? bwd_->peak() : 0; }
  void reset_peaks();
  // Frees both arenas and the ring attention's buffers (colocation: the KV cache of generation takes the memory);
  // the next forward allocates them again at the size they had.
  void release_arenas();
  // Bytes the forward and backward arenas need for T tokens of this rank's rows with the current recompute
  // settings (the forward arena of a model that runs no backward is smaller: for_backward = false), sequence
  // parallelism's padding included.
  size_t forward_bytes(int T, bool for_backward = true) const;
  size_t backward_bytes(int T) const;
  // Device bytes of a training micro-batch of T rows of this rank with every layer at recompute r: both arenas
  // and, under context parallelism, the ring's buffers (the memory planner's count, rl/device_memory_plan.h).
  size_t training_bytes(int T, Recompute r) const;
  // This rank's rows of a micro-batch of `tokens` tokens in one sequence (tokens / cp, padded; tokens without cp).
  int local_tokens(int tokens) const;
  // Device memory in use now by everything on the device (cudaMemGetInfo: total - free).
  static size_t device_bytes_in_use();

 private:
  // T: this rank's rows; full_T: the caller's rows (T without context parallelism).
  size_t layout_forward(int T, int S, int full_T, Arena* arena, bool for_backward);  // arena == nullptr: counts
  size_t layout_backward(int T, Arena* arena);
  void ensure_arenas(int T, bool for_backward);
  LayerBatch layer_batch() const;
  CudaBackend::Exec exec() const { return {&ctx_, prof_}; }
  LayerAttention<CudaBackend>& attention();  // packed, or the ring under cp
  LayerFeedForward<CudaBackend>& feed_forward();  // the config's
  // Whether a training forward keeps the LM head's logits for its backward (cuda::lm_head_saved_forward): with
  // the whole vocabulary on this rank, no layer recomputed (recompute trades memory for time; the kept logits,
  // T x V fp16, are the largest activation of a small model) and set_keep_logits on.
  bool keeps_logits(bool for_backward) const;
  int padded_tokens(int T) const;  // T rounded up to a multiple of tp under sequence parallelism
  int local_rows(int T) const;     // rows of the residual stream on this rank
  LayerCollectives<bf16>* layers() const;  // the layer hooks (null at tp = 1)
  void pad_for_sequence_parallelism();

  const ModelConfig c_;
  GpuTensorParallel* tp_ = nullptr;
  GpuContextParallel* cp_ = nullptr;
  std::unique_ptr<GpuRingAttention> ring_;  // cp only
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ParamLayout layout_;
  const cuda::GpuContext ctx_;
  const ModelSpan span_;  // resolved
  std::vector<Recompute> recompute_;
  int chunk_v_ = 8192;
  bool keep_logits_ = true;
  GpuOpProfiler* prof_ = nullptr;
  std::function<void(int)> layer_hook_;
  PackedAttention<CudaBackend> attention_;
  std::unique_ptr<LayerFeedForward<CudaBackend>> feed_forward_;

  DeviceArray<bf16> weights_;  // owned (empty with shared weights)
  bf16* w_ = nullptr;          // what the model reads: weights_ or the shared buffer
  DeviceArray<float> inv_freq_;
  std::unique_ptr<Arena> fwd_, bwd_;
  int arena_tokens_ = 0;
  bool arena_backward_ = false;  // the arenas hold the training layout
  bool arenas_stale_ = false;

  PackedBatch batch_;  // host copy (the device copies are in the forward arena), with the padding
  int T_ = 0, max_seqlen_ = 0;
  int T_caller_ = 0;  // the caller's rows (T_batch_ but under context parallelism)
  int T_batch_ = 0;   // this rank's rows of the caller's batch (T_ without the sequence-parallel padding)
  float temperature_ = 1.f;
  bool have_entropy_ = false;
  bool backward_ready_ = false;

  // Forward arena contents.
  int32_t* tokens_ = nullptr, *positions_ = nullptr, *targets_ = nullptr, *cu_seqlens_ = nullptr;
  std::vector<bf16*> x_;                     // L+1 residual streams [local rows, C]
  std::vector<LayerActivations<CudaBackend>> saved_;   // per layer; recomputed layers point into the shared scratch
  LayerScratch<CudaBackend> fscratch_;                 // o_proj / down_proj outputs
  float* rstd_f_ = nullptr;                  // final RMSNorm [local rows]
  bf16* h_f_ = nullptr;                      // [T, C]
  bf16* h_f_local_ = nullptr;                // [local rows, C] (h_f_ itself without sequence parallelism)
  float* lse_f_ = nullptr;                   // LM head log-sum-exp [T]
  void* kept_logits_ = nullptr;              // the LM head's kept logits (keeps_logits), or null
  float* logprob_ = nullptr, *entropy_ = nullptr;
  // Context parallelism: the caller's rows gathered from every rank, and this rank's rows of the caller's gradients.
  float* logprob_all_ = nullptr, *entropy_all_ = nullptr;
  float* dlogprob_local_ = nullptr, *dentropy_local_ = nullptr;
  bf16* dres_ = nullptr;  // the backward's residual gradient: at its end, the input's
  bool have_output_ = false;  // a span without the head ran its forward: output() is valid
};

}  // namespace hone

#endif  // HONE_CUDA
