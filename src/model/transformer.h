// The decoder-only transformer (Llama, Qwen2, Qwen3) in fp32 on the CPU: a hand-written forward that saves
// what backward needs, and a backward that accumulates parameter gradients into a ModelWeights-shaped buffer.
//
//   embed -> L x [RMSNorm -> q,k,v (+bias) -> (q/k per-head RMSNorm) -> RoPE -> packed causal GQA attention
//                 -> o_proj -> +residual -> RMSNorm -> gate/up -> SwiGLU -> down -> +residual]
//         -> RMSNorm -> LM head fused with logprob and entropy (vocabulary chunks; no [T, V] logits)
//
// Per-layer activation recompute (model/layer_recompute.h): a fully recomputed layer keeps only its input and reruns
// its forward into a shared scratch during backward, a selective one keeps its GEMM and attention outputs and reruns
// the elementwise ops between them (bitwise the same results, less memory). See doc/model-engine.md.
//
// A pipeline chunk (model/model_span.h) runs a span of the layers: without the embedding it starts from the hidden
// state the previous chunk sent (forward's input), without the head it ends with the hidden state it hands on
// (output()); its backward then takes the gradient of that output and leaves the gradient of its input
// (input_grad()). Several Transformers may share one weight buffer: each holds one micro-batch's activations.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu_backend.h"
#include "model/layer_recompute.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/model_span.h"
#include "model/packed_batch.h"
#include "model/transformer_layer.h"
#include "model/weights.h"
#include "tensor/tensor.h"

namespace hone {

class ExpertParallel;
class MoeFeedForward;
class TensorParallel;
class ContextParallel;
class RingAttention;

class Transformer {
 public:
  // Copies the config and keeps a reference to the weights, which must outlive the Transformer. The weights may
  // change between calls (optimizer steps); forward always reads their current values.
  // With tp (which must outlive the Transformer), the weights are this rank's shard (parallel/shard_weights.h):
  // the layers compute this rank's heads and feed-forward slice, the embedding and LM head its vocabulary slice, and
  // every rank gets the whole model's logprobs and entropies. forward and backward are then collective over tp,
  // and backward leaves the gradients of parameters several ranks hold partial until tp->sum_partial_gradients.
  // With a span, only its layers (and the embedding / head when it has them) are run and read from the weights.
  // With cp (which must outlive the Transformer; parallel/context_parallel.h), each batch is split over the
  // context-parallel group: this rank runs its rows (attention by the ring, parallel/ring_attention.h), every rank
  // gets the logprobs and entropies of all the caller's rows, and backward takes the gradients of all of them and
  // leaves this rank's share of the parameter gradients (summed over the group by the optimizer). cp needs the
  // whole model (no span). With ep (a mixture of experts under expert parallelism, which must outlive the
  // Transformer), the weights hold this rank's experts and forward and backward are collective over the
  // expert-parallel group.
  Transformer(const ModelConfig& config, const ModelWeights& weights, TensorParallel* tp = nullptr,
              ModelSpan span = {}, ContextParallel* cp = nullptr, ExpertParallel* ep = nullptr);
  ~Transformer();

  // Activation recompute (model/layer_recompute.h), every layer or one.
  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  void set_layer_recompute(int layer, Recompute r);
  void set_layer_recompute(int layer, bool on) { set_layer_recompute(layer, on ? Recompute::full : Recompute::none); }
  Recompute layer_recompute(int layer) const { return recompute_[size_t(layer)]; }
  void set_vocab_chunk(int chunk_v) { chunk_v_ = chunk_v; }
  // The mixture-of-experts feed-forward of an MoE model (its routing, the load-balancing loss and its weight in
  // backward, routing replay: model/moe_feed_forward.h); null for a dense model.
  MoeFeedForward* moe() const;

  // Runs the batch (copied; positions, targets and cu_seqlens as packed). After it, logprobs() and entropy()
  // hold [T] values (0 where targets < 0) until the next forward. Under sequence and context parallelism a batch
  // runs with a few padding tokens the caller never sees. Token ids must be in [0, vocab_size).
  // With need_entropy false, entropy is not computed and backward must get dentropy == nullptr.
  // A span without the embedding reads its hidden state from `input` [boundary_rows(T), C] instead of the tokens.
  void forward(const PackedBatch& batch, float temperature = 1.f, bool need_entropy = true,
               const float* input = nullptr);
  const Tensor& logprobs() const { return cp_ ? logprob_all_ : logprob_; }  // a span with the head
  const Tensor& entropy() const { return cp_ ? entropy_all_ : entropy_; }
  // A span without the head: its hidden state [boundary_rows(T), C] after the last forward.
  const float* output() const;
  // Rows of the hidden state that crosses a chunk boundary for a batch of T tokens: T, or with sequence parallelism
  // this rank's share of T padded to a multiple of tp.
  int boundary_rows(int T) const;
  const ModelSpan& span() const { return span_; }

  // Gradient of sum_t dlogprob[t] * logprob[t] + dentropy[t] * entropy[t] for the last forward's batch,
  // ACCUMULATED into grads (allocate_weights(config) layout; a tied lm_head lands in embed_tokens).
  // dentropy may be null. Can be called once per forward. A span without the head takes the gradient of its output
  // (output_grad, [boundary_rows(T), C]) instead of dlogprob and dentropy (then null).
  void backward(const float* dlogprob, const float* dentropy, ModelWeights& grads,
                const float* output_grad = nullptr);
  // A span without the embedding: the gradient of its input [boundary_rows(T), C] after the last backward.
  const float* input_grad() const;

  // Bytes held for activations and backward scratch now, and for the last forward's T alone (this rank's rows).
  size_t allocated_bytes() const { return (act_.nbytes() + grad_.nbytes()); }
  size_t activation_bytes() const { return size_t(act_used_) * sizeof(float); }
  size_t backward_scratch_bytes() const { return size_t(grad_used_) * sizeof(float); }
  // Activation floats per layer for T tokens (saved, excluding the layer input; without sequence parallelism) and
  // for the whole forward (as this rank runs it).
  static int64_t layer_activation_floats(const LayerShape& s, int T);
  int64_t forward_floats(int T) const;
  // The same without a Transformer (the host memory planner counts before any weights exist): the forward arena for
  // T tokens of which this rank holds local_rows (T / tp under sequence parallelism, else T) with every layer's
  // recompute, and the backward scratch.
  static int64_t forward_floats(const ModelConfig& c, const LayerShape& shape, int T, int local_rows,
                                Recompute recompute);
  static int64_t backward_floats(const ModelConfig& c, const LayerShape& shape, int T, int local_rows);

 private:
  void plan_forward(int T);
  void pad_for_sequence_parallelism();
  int local_rows(int T) const;               // rows of the residual stream on this rank
  LayerCollectives<float>* layers() const;   // the layer hooks (null at tp = 1)
  LayerAttention<CpuBackend>& attention();      // the attention seam: packed, or the ring under cp
  LayerFeedForward<CpuBackend>& feed_forward();  // the feed-forward seam of the config's layers
  int split_multiple() const;                // the local rows of a context-parallel split are a multiple of it
  void layer_inputs(int layer, LayerActivations<CpuBackend>& a) const;

  const ModelConfig c_;
  TensorParallel* tp_ = nullptr;
  ContextParallel* cp_ = nullptr;
  std::unique_ptr<RingAttention> ring_;  // cp only
  const ModelSpan span_;  // resolved
  const LayerShape shape_;  // this rank's shard (the whole model at tp = 1)
  const ModelWeights& w_;
  PackedAttention<CpuBackend> attention_;
  std::unique_ptr<LayerFeedForward<CpuBackend>> feed_forward_;
  std::vector<Recompute> recompute_;
  int chunk_v_ = 8192;
  std::vector<float> inv_freq_;

  PackedBatch batch_;
  float temperature_ = 1.f;
  bool have_entropy_ = false;
  bool backward_ready_ = false;
  int T_ = 0;        // tokens run, with the sequence-parallel padding
  int T_batch_ = 0;  // tokens of the batch this rank runs before the sequence-parallel padding
  int T_caller_ = 0; // tokens of the caller's batch (T_batch_ but under context parallelism)
  std::vector<float> dlogprob_pad_, dentropy_pad_;
  std::vector<float> dlogprob_local_, dentropy_local_;  // cp: this rank's rows of the caller's gradients

  Tensor act_;             // forward arena
  int64_t act_used_ = 0;
  std::vector<float*> x_;  // L+1 residual streams [T, C]: x_[0] embeddings, x_[l+1] output of layer l
  std::vector<LayerActivations<CpuBackend>> saved_;  // per layer; recomputed layers point into the shared scratch
  LayerActivations<CpuBackend> scratch_;             // shared by recomputed layers
  LayerScratch<CpuBackend> fscratch_;                // the layers' forward scratch (o_proj / down_proj outputs)
  float* rstd_f_ = nullptr;              // final RMSNorm [T]
  float* h_f_ = nullptr;                 // [T, C]
  float* h_f_local_ = nullptr;           // [local rows, C] (h_f_ itself without sequence parallelism)
  float* lse_f_ = nullptr;               // LM head log-sum-exp [T]
  Tensor logprob_, entropy_;             // views into the arena, [T]
  Tensor logprob_all_, entropy_all_;     // cp: [the caller's T], gathered from every rank

  Tensor grad_;            // backward arena
  int64_t grad_used_ = 0;
  float* dres_ = nullptr;  // the residual gradient, at the end of backward the input's
};

}  // namespace hone
