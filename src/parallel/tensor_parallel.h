// Tensor parallelism (Megatron's split, parallel/shard_layout.h), written once over a backend B: what one rank of a
// tp group does where the model's work crosses ranks, over the group's Comm of the backend's memory (MPI on the CPU;
// on a GPU a DeviceComm ordered on the engine's stream: NCCL, or the GPU tests' two-thread pair). The layer body
// calls the LayerCollectives hooks (model/layer_collectives.h) of layers(); the transformer and the generators call
// the vocabulary-parallel embedding and LM head here; the engines call the gradient sums and the global norm. A
// tp = 1 run never builds one of these.
//
//   layers      all-reduce of the row-parallel outputs (o_proj, down_proj) in the forward and of the
//               column-parallel input gradients (q/k/v, gate/up) in the backward: [T, C] values each. Under
//               sequence parallelism (training and logprobs; generation keeps whole rows, layers_whole_rows()) the
//               residual stream holds T / tp rows: all-gather of the normed rows before the column-parallel GEMMs,
//               reduce-scatter after the row-parallel ones, and the reverse in the backward
//   embedding   each rank looks up the ids of its vocabulary slice (zero rows elsewhere), one all-reduce of [T, C]
//               (a reduce-scatter under sequence parallelism; the final norm's rows are all-gathered for the head)
//   LM head     per row: max over the slices (all-reduce max of T floats), then the rescaled sum of exp, entropy
//               sum and target logit (all-reduce sum of 3T floats); never [T, V] logits. Backward: the head's
//               input gradient [T, C] all-reduced (reduce-scattered). Generation: the slices' logits all-gathered
//   gradients   parameters held by several ranks get partial gradients from each: the q/k norm weights (shared by
//               the heads of every rank), the other norm weights under sequence parallelism (each rank normed its
//               own tokens) and, when tp > KV heads, k/v of a KV head replicated over tp / Hkv ranks;
//               sum_partial_gradients adds them up over the group before the optimizer
//   norm        the global gradient norm: every rank's sum of squares with replicated parameters weighted by
//               1 / (ranks holding them), summed over the group
//
// Sequence parallelism moves each collective in the chunks of parallel/sequence_chunks.h (parallel.tp_comm_overlap
// with parallel.tp_comm_overlap_chunks; else one chunk). The layers' collectives are posted through the backend's
// B::SequenceOverlap (backend/sequence_overlap.h): on the CPU each runs when posted and the GEMMs run in one piece;
// on a GPU with overlap they run on a communication stream and the compute stream waits for a chunk only where it
// reads it:
//   column-parallel forward   the all-gather of chunk j+1 of the normed rows runs beside the q/k/v (gate/up) GEMMs
//                             of chunk j
//   row-parallel forward      the reduce-scatter of chunk j of the o_proj (down_proj) output runs beside the GEMM of
//                             chunk j+1
//   row-parallel backward     the all-gather of chunk j+1 of the residual gradient runs beside the input-gradient
//                             GEMM of chunk j; the weight gradient follows
//   column-parallel backward  the all-gather of the normed rows (again: the layers share one place for them) runs
//                             beside the input-gradient GEMMs, and the reduce-scatter of the input gradient's
//                             chunk j beside the later chunks' GEMMs and the weight-gradient GEMMs (as Megatron
//                             overlaps its backward)
// Every hook returns with the compute ordered after all of the hook's collectives: the communication stream never
// runs into the next hook's buffers, and a collective issued with the compute (the LM head's statistics) never runs
// beside one on the communication stream (one communicator runs one collective at a time). Generation never uses
// these (whole rows), so no CUDA graph captures them.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/layer_collectives.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/sequence_chunks.h"
#include "parallel/shard_layout.h"
#include "train/grad_clip.h"

namespace hone {

// The deck's choices for sequence parallelism (parallel.sequence_parallel, parallel.tp_comm_overlap and
// parallel.tp_comm_overlap_chunks).
struct SequenceParallelism {
  bool on = false;
  bool overlap = false;  // the layers' collectives in chunks, beside the GEMMs where the backend can
  int chunks = 4;        // with overlap: the chunks of rows each collective is cut into
};

template <typename B>
class TensorParallelGroup {
 public:
  using A = typename B::Act;
  using Exec = typename B::Exec;

  // tp (the group's Comm over the backend's memory, ordered on exec's stream on a GPU) must outlive this object,
  // and so must exec's context. sp: the deck's sequence parallelism (generation keeps whole rows whatever it says).
  // The layout is ShardLayout::of(c, tp.size(), tp.rank()), or `stage` (a copy is kept: this rank's pipeline
  // stage, parallel/shard_layout.h), whose flat offsets the gradient sums and the norm then read.
  TensorParallelGroup(const ModelConfig& c, Comm& tp, Exec exec, SequenceParallelism sp = {},
                      const ShardLayout* stage = nullptr);
  // The CPU: sequence_chunks pieces of every sequence-parallel collective (1: whole).
  TensorParallelGroup(const ModelConfig& c, Comm& tp, bool sequence_parallel, int sequence_chunks = 1,
                      const ShardLayout* stage = nullptr)
    requires std::is_same_v<B, CpuBackend>
      : TensorParallelGroup(c, tp, Exec{}, SequenceParallelism{sequence_parallel, sequence_chunks > 1, sequence_chunks},
                            stage) {}
  TensorParallelGroup(const TensorParallelGroup&) = delete;
  TensorParallelGroup& operator=(const TensorParallelGroup&) = delete;

  const ModelConfig& config() const { return c_; }
  const ShardLayout& layout() const { return layout_; }
  const LayerShape& shape() const { return layout_.shape(); }
  Comm& comm() const { return tp_; }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }
  bool sequence_parallel() const { return sp_; }
  // Rows of the residual stream for T tokens: T / tp under sequence parallelism (T a multiple of tp), else T.
  int local_rows(int T) const { return sp_ ? T / size() : T; }
  // The chunks of the sequence-parallel layout of T tokens (T a multiple of tp).
  SequenceChunks sequence_chunks(int T) const { return SequenceChunks(T, size(), chunks_); }

  // ---- the layer hooks: of training and logprobs (sequence parallel when on), and of generation (whole rows) ----
  LayerCollectives<A>* layers() { return sp_ ? static_cast<LayerCollectives<A>*>(&sequence_rows_) : &whole_rows_; }
  LayerCollectives<A>* layers_whole_rows() { return &whole_rows_; }

  // ---- vocabulary-parallel embedding (wte: this rank's slice [vocab, C]) of T tokens into out [rows, C]: all T
  // rows, or this rank's local_rows(T) under sequence parallelism (as `local`).
  void embedding_forward(A* out, const int32_t* ids, const A* wte, int T, bool local = false);
  // Only this rank's rows of dwte; dout [rows, C] as above (the same on every rank when whole).
  void embedding_backward(float* dwte, const A* dout, const int32_t* ids, int T, bool local = false);
  // Sequence parallelism: full [T, C] from every rank's local rows.
  void gather_rows(const A* local, A* full, int T);

  // ---- vocabulary-parallel LM head fused with logprob and entropy (as B::lm_head_logprob_forward/backward, w this
  // rank's slice): every rank gets the whole vocabulary's logprob, entropy and lse of every row.
  void lm_head_forward(float* logprob, float* entropy, float* lse, const A* h, const A* w, const int32_t* targets,
                       int T, float temperature, int chunk_v);
  // dh += the whole head's input gradient, summed over the group: [T, C], or this rank's local rows when `local`
  // (dh must hold no earlier partial sums of other ranks); dw += this slice's rows.
  void lm_head_backward(A* dh, float* dw, const float* dlogprob, const float* dentropy, const A* h, const A* w,
                        const int32_t* targets, const float* lse, const float* entropy, int T, float temperature,
                        int chunk_v, bool local = false);

  // ---- generation ----
  // Logits [R, V] fp32 over the whole vocabulary on every rank: this rank's slice (h [R, C] times its rows of w),
  // all-gathered, the padding columns dropped. Every rank then holds the same rows, so every rank's sampler picks
  // the same tokens as one rank would. In device memory the staging is sized by reserve_logits(), outside any CUDA
  // graph capture; host staging grows as needed.
  void reserve_logits(int max_rows);
  void lm_head_logits(float* logits, const A* h, const A* w, int R);
  // The smallest value of v over the group (host value; collective): sizes that must agree, such as the KV blocks.
  int64_t min_over_group(int64_t v);
  // Waits for exec's stream (under NCCL's watchdog when the group is an NcclComm); what names the work waited for.
  void synchronize(const std::string& what);

  // ---- gradients and their norm (fp32, the shard's flat layout, in the backend's memory) ----
  // Sums the partial gradients of parameters that several ranks hold (q/k norm weights; the other norm weights
  // under sequence parallelism; replicated KV heads) over the group, in place. Collective.
  void sum_partial_gradients(float* grads);
  void sum_partial_gradients(ModelWeights& grads);  // host weights shaped as this rank's shard
  // Sum of squares of g = this rank's shard flat buffer at offsets [begin, begin + n), each parameter weighted by
  // 1 / (the ranks that hold the same values) so that summing over the group counts every value once. Local (it
  // waits for the stream).
  double weighted_sum_squares(const float* g, int64_t begin, int64_t n) const;
  // The sum of every rank's x (host value; collective).
  double sum_over_group(double x);
  // The clipping norm of an optimizer on this shard: weighted_sum_squares, summed over the group.
  ShardedNorm sharded_norm();

 private:
  template <typename T>
  using Array = typename B::template Array<T>;
  static constexpr CommType kActType = std::is_same_v<A, float> ? CommType::f32 : CommType::bf16;

  // The layer hooks of whole rows: the all-reduce of the partial sums.
  class WholeRows final : public LayerCollectives<A> {
   public:
    explicit WholeRows(TensorParallelGroup& g) : g_(g) {}
    void gather_sequence(const A*, A*, int64_t) override;
    void reduce_row_parallel_output(A* y, A* out, int64_t n) override;
    void reduce_column_parallel_input_grad(A* dx, A* out, int64_t n) override {
      reduce_row_parallel_output(dx, out, n);
    }

   private:
    TensorParallelGroup& g_;
  };

  // The layer hooks of this rank's rows: all-gathers and reduce-scatters in the chunks of the layout, posted
  // through B::SequenceOverlap (the GEMMs chunk by chunk when it splits them).
  class SequenceRows final : public LayerCollectives<A> {
   public:
    using typename LayerCollectives<A>::RowGemm;
    using typename LayerCollectives<A>::Gemm;
    SequenceRows(TensorParallelGroup& g, bool overlap);
    int local_rows(int T) const override { return T / g_.size(); }
    void column_parallel_forward(const A* local, A* full, int T, int C, const RowGemm& gemm) override;
    void row_parallel_forward(A* y, A* out, int T, int C, const RowGemm& gemm) override;
    void row_parallel_backward(const A* dres, A* dy, int T, int C, const RowGemm& dgrad, const Gemm& wgrad) override;
    void column_parallel_backward(const A* local, A* full, A* dx, A* out, int T, int C, const RowGemm& dgrad,
                                  const Gemm& wgrad) override;
    // With the compute (n: local elements for the gather, full elements for the others).
    void gather_sequence(const A* local, A* full, int64_t n) override;
    void reduce_row_parallel_output(A* y, A* out, int64_t n) override { scatter_sum(y, out, n); }
    void reduce_column_parallel_input_grad(A* dx, A* out, int64_t n) override { scatter_sum(dx, out, n); }
    // This rank's rows of the sum over the group of full [T, C] (n: its elements).
    void scatter_sum(const A* full, A* local, int64_t n);

   private:
    // Chunk j of every rank's `local` rows into `full` (all-gather), or of `full` summed into `local`
    // (reduce-scatter), on the side.
    void post_gather(const SequenceChunks& ch, int j, const A* local, A* full, int C);
    void post_scatter(const SequenceChunks& ch, int j, const A* full, A* local, int C);
    // All-gathers local into full and runs each(row0, rows) on the gathered rows: chunk by chunk as the chunks
    // arrive when split, else once all have (the column-parallel forward, the row-parallel backward).
    void gather_then(const A* local, A* full, int T, int C, const RowGemm& each);

    TensorParallelGroup& g_;
    typename B::SequenceOverlap overlap_;
    // Marks: chunk j's is j; then three more.
    const int ready_, gathered_, done_;
  };

  int vocab_valid() const;
  A* rows_scratch(int64_t n);  // [T, C] of the embedding and the LM head's input gradient
  // One host value through a one-element buffer of the backend's memory, all-reduced (sum or min) over the group.
  template <typename T>
  T scalar_all_reduce(T x, bool min);

  ModelConfig c_;
  Comm& tp_;
  const Exec exec_;
  bool sp_;
  int chunks_;  // of the sequence-parallel layout
  ShardLayout layout_;
  WholeRows whole_rows_;
  SequenceRows sequence_rows_;
  Array<A> rows_, dh_local_;
  Array<float> stats_, max_, kv_whole_, logits_stage_;
  Array<double> scalar_;
};

// The engines' names for the two instantiations.
struct CudaBackend;
using TensorParallel = TensorParallelGroup<CpuBackend>;
using GpuTensorParallel = TensorParallelGroup<CudaBackend>;

}  // namespace hone
