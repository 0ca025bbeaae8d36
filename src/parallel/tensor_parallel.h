// Tensor parallelism on the CPU engine (Megatron's split, parallel/shard_layout.h): what one rank of a tp group does
// where the model's work crosses ranks, over the group's host Comm (MPI). The layer body calls the LayerCollectives
// hooks (model/layer_collectives.h); the transformer calls the vocabulary-parallel embedding and LM head here; the
// engine calls the gradient sums and the global norm. A tp = 1 run never builds one of these.
//
//   layers      all-reduce of the row-parallel outputs (o_proj, down_proj) in the forward and of the
//               column-parallel input gradients (q/k/v, gate/up) in the backward: [T, C] floats each
//   embedding   each rank looks up the ids of its vocabulary slice (zero rows elsewhere), one all-reduce of [T, C]
//   LM head     per row: max over the slices (all-reduce max of T floats), then the rescaled sum of exp, entropy
//               sum and target logit (all-reduce sum of 3T floats); never [T, V] logits. Backward: the head's
//               input gradient [T, C] all-reduced
//   gradients   parameters held by several ranks get partial gradients from each: the q/k norm weights (shared by
//               the heads of every rank) and, when tp > KV heads, k/v of a KV head replicated over tp / Hkv ranks;
//               sum_partial_gradients adds them up over the group before the optimizer
//   norm        the global gradient norm: every rank's sum of squares with replicated parameters weighted by
//               1 / (ranks holding them), summed over the group
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "model/layer_collectives.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/shard_layout.h"

namespace hone {

class TensorParallel final : public LayerCollectives<float> {
 public:
  // tp must outlive this object; the layout is ShardLayout::of(c, tp.size(), tp.rank()).
  TensorParallel(const ModelConfig& c, Comm& tp);

  const ModelConfig& config() const { return c_; }
  const ShardLayout& layout() const { return layout_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& comm() const { return tp_; }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }

  // ---- layer hooks: sums over the group in place ----
  void reduce_row_parallel_output(float* y, int64_t n) override;
  void reduce_column_parallel_input_grad(float* dx, int64_t n) override;

  // ---- vocabulary-parallel embedding (wte: this rank's slice [vocab, C]) ----
  void embedding_forward(float* out, const int32_t* ids, const float* wte, int T) const;
  // Only this rank's rows of dwte (dout is the same on every rank).
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int T) const;

  // ---- vocabulary-parallel LM head fused with logprob and entropy (as cpu::lm_head_logprob_forward/backward, w
  // this rank's slice): every rank gets the whole vocabulary's logprob, entropy and lse of every row.
  void lm_head_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                       const int32_t* targets, int T, float temperature, int chunk_v);
  // dh[T, C] += the whole head's input gradient (summed over the group: dh must hold no earlier partial sums of
  // other ranks); dw += this slice's rows.
  void lm_head_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                        const float* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                        float temperature, int chunk_v);
  // logits[R, vocab_total] of R rows from this rank's h W_slice^T (generation): all-gathered, padding dropped.
  void lm_head_logits(float* logits, const float* h, const float* w, int R);

  // ---- gradients and their norm ----
  // Sums the partial gradients of parameters that several ranks hold (q/k norm weights; replicated KV heads) over
  // the group, in grads (this rank's shard weights). Collective.
  void sum_partial_gradients(ModelWeights& grads);
  // Sum of squares of g = this rank's shard flat buffer at offsets [begin, begin + n), each parameter weighted by
  // 1 / (the ranks that hold the same values) so that summing over the group counts every value once. Local.
  double weighted_sum_squares(const float* g, int64_t begin, int64_t n) const;

 private:
  ModelConfig c_;
  Comm& tp_;
  ShardLayout layout_;
  std::vector<float> weight_of_;                  // per parameter of the layout: 1 / ranks holding it
  std::vector<float> stats_, max_, dh_, logits_;  // scratch
  std::vector<float> kv_whole_;                   // [Hkv * D * C] for replicated KV heads' gradients
};

}  // namespace hone
