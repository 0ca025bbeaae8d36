// Tensor parallelism on the CPU engine (Megatron's split, parallel/shard_layout.h): what one rank of a tp group does
// where the model's work crosses ranks, over the group's host Comm (MPI). The layer body calls the LayerCollectives
// hooks (model/layer_collectives.h) of layers(); the transformer calls the vocabulary-parallel embedding and LM head
// here; the engine calls the gradient sums and the global norm. A tp = 1 run never builds one of these.
//
//   layers      all-reduce of the row-parallel outputs (o_proj, down_proj) in the forward and of the
//               column-parallel input gradients (q/k/v, gate/up) in the backward: [T, C] floats each. Under
//               sequence parallelism (training and logprobs; generation keeps whole rows, layers_whole_rows()) the
//               residual stream holds T / tp rows: all-gather of the normed rows before the column-parallel GEMMs,
//               reduce-scatter after the row-parallel ones, and the reverse in the backward; each collective in
//               `sequence_chunks` pieces of rows (parallel/sequence_chunks.h: the layout the GPU engine overlaps
//               with its GEMMs; here they run one after the other)
//   embedding   each rank looks up the ids of its vocabulary slice (zero rows elsewhere), one all-reduce of [T, C]
//               (a reduce-scatter under sequence parallelism)
//   LM head     per row: max over the slices (all-reduce max of T floats), then the rescaled sum of exp, entropy
//               sum and target logit (all-reduce sum of 3T floats); never [T, V] logits. Backward: the head's
//               input gradient [T, C] all-reduced
//   gradients   parameters held by several ranks get partial gradients from each: the q/k norm weights (shared by
//               the heads of every rank), the other norm weights under sequence parallelism (each rank normed its
//               own tokens) and, when tp > KV heads, k/v of a KV head replicated over tp / Hkv ranks;
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
#include "parallel/sequence_chunks.h"
#include "parallel/shard_layout.h"

namespace hone {

class TensorParallel {
 public:
  // tp must outlive this object; the layout is ShardLayout::of(c, tp.size(), tp.rank()), or `stage` (a copy is
  // kept: this rank's pipeline stage, parallel/shard_layout.h), whose flat offsets the gradient sums and the norm
  // then read. sequence_chunks: the pieces each sequence-parallel collective moves (parallel.tp_comm_overlap_chunks
  // when parallel.tp_comm_overlap).
  TensorParallel(const ModelConfig& c, Comm& tp, bool sequence_parallel = false, int sequence_chunks = 1,
                 const ShardLayout* stage = nullptr);
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  const ModelConfig& config() const { return c_; }
  const ShardLayout& layout() const { return layout_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& comm() const { return tp_; }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }
  bool sequence_parallel() const { return sp_; }
  // Rows of the residual stream for T tokens: T / tp under sequence parallelism (T a multiple of tp), else T.
  int local_rows(int T) const { return sp_ ? T / size() : T; }

  // ---- the layer hooks: of training and logprobs (sequence parallel when on), and of generation (whole rows) ----
  LayerCollectives<float>* layers() { return sp_ ? &sequence_rows_ : &whole_rows_; }
  LayerCollectives<float>* layers_whole_rows() { return &whole_rows_; }

  // ---- vocabulary-parallel embedding (wte: this rank's slice [vocab, C]) of T tokens into out [rows, C]: all T
  // rows, or this rank's local_rows(T) under sequence parallelism (as `local`).
  void embedding_forward(float* out, const int32_t* ids, const float* wte, int T, bool local);
  // Only this rank's rows of dwte; dout [rows, C] as above (the same on every rank when whole).
  void embedding_backward(float* dwte, const float* dout, const int32_t* ids, int T, bool local);
  // Sequence parallelism: full [T, C] from every rank's local rows.
  void gather_rows(const float* local, float* full, int T);
  // The chunks of the sequence-parallel layout of T tokens (T a multiple of tp).
  SequenceChunks sequence_chunks(int T) const { return SequenceChunks(T, size(), chunks_); }

  // ---- vocabulary-parallel LM head fused with logprob and entropy (as cpu::lm_head_logprob_forward/backward, w
  // this rank's slice): every rank gets the whole vocabulary's logprob, entropy and lse of every row.
  void lm_head_forward(float* logprob, float* entropy, float* lse, const float* h, const float* w,
                       const int32_t* targets, int T, float temperature, int chunk_v);
  // dh += the whole head's input gradient, summed over the group: [T, C], or this rank's local rows when `local`
  // (dh must hold no earlier partial sums of other ranks); dw += this slice's rows.
  void lm_head_backward(float* dh, float* dw, const float* dlogprob, const float* dentropy, const float* h,
                        const float* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                        float temperature, int chunk_v, bool local);
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
  // The layer hooks over the group, whole rows (all-reduce) or this rank's rows (all-gather, reduce-scatter, in
  // the chunks of the sequence-parallel layout; rows of `hidden` floats).
  class Rows final : public LayerCollectives<float> {
   public:
    Rows(Comm& tp, bool sequence, int chunks, int hidden)
        : tp_(tp), sequence_(sequence), chunks_(chunks), hidden_(hidden) {}
    int local_rows(int T) const override { return sequence_ ? T / tp_.size() : T; }
    void gather_sequence(const float* local, float* full, int64_t n) override;
    void reduce_row_parallel_output(float* y, float* out, int64_t n) override { reduce(y, out, n); }
    void reduce_column_parallel_input_grad(float* dx, float* out, int64_t n) override { reduce(dx, out, n); }
    // Sequence parallelism: this rank's rows of the sum over the group of full [T, C] (n: its elements).
    void scatter_sum(const float* full, float* local, int64_t n);

   private:
    void reduce(float* partial, float* out, int64_t n);
    Comm& tp_;
    bool sequence_;
    int chunks_, hidden_;
  };

  ModelConfig c_;
  Comm& tp_;
  bool sp_;
  int chunks_;
  ShardLayout layout_;
  Rows whole_rows_, sequence_rows_;
  std::vector<float> full_;  // [T, C] scratch of the sequence-parallel embedding
  std::vector<float> stats_, max_, dh_, dh_local_, logits_;  // scratch
  std::vector<float> kv_whole_;                   // [Hkv * D * C] for replicated KV heads' gradients
};

}  // namespace hone
