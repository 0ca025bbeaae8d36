// Tensor parallelism on the GPU engine: the twin of parallel/tensor_parallel.h over the tp group's DeviceComm (an
// NcclComm on the context's stream, stream-ordered in the engine; the tests' two-thread pair). What crosses ranks is
// the same as on the CPU: the layer hooks' all-reduces of bf16 [T, C] partial sums (whole rows) or, under sequence
// parallelism (training and logprobs), their all-gathers and reduce-scatters (parallel/gpu_sequence_parallel.h,
// overlapped with the GEMMs when parallel.tp_comm_overlap); the vocabulary-parallel embedding's all-reduce (a
// reduce-scatter under sequence parallelism), the final norm's all-gather, the LM head's per-token statistics
// (all-reduce max of T floats, sum of 3T floats) and its input gradient; the partial gradients of parameters
// several ranks hold, and the gradient norm over the shards.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/device_comm.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/layer_collectives.h"
#include "model/model_config.h"
#include "parallel/gpu_sequence_parallel.h"
#include "parallel/shard_layout.h"
#include "train/grad_clip.h"

namespace hone {

using bf16 = cuda::bf16;

class GpuTensorParallel {
 public:
  // tp (a DeviceComm whose Comm collectives are ordered on ctx's stream) and ctx must outlive this object. sp: the
  // deck's sequence parallelism (ignored by generation, which keeps whole rows). stage: this rank's pipeline stage's
  // layout (a copy is kept; default: the whole model's shard).
  GpuTensorParallel(const ModelConfig& c, DeviceComm& tp, const cuda::GpuContext& ctx, SequenceParallelism sp = {},
                    const ShardLayout* stage = nullptr);
  GpuTensorParallel(const GpuTensorParallel&) = delete;
  GpuTensorParallel& operator=(const GpuTensorParallel&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const LayerShape& shape() const { return layout_.shape(); }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }
  bool sequence_parallel() const { return sequence_ != nullptr; }
  // Rows of the residual stream for T tokens: T / tp under sequence parallelism (T a multiple of tp), else T.
  int local_rows(int T) const { return sequence_ ? T / size() : T; }

  // ---- the layer hooks: of training and logprobs (sequence parallel when on), and of generation (whole rows) ----
  LayerCollectives<bf16>* layers();
  LayerCollectives<bf16>* layers_whole_rows() { return &whole_rows_; }

  // ---- vocabulary-parallel embedding and LM head (w, wte: this rank's slice), as TensorParallel's ----
  // out: all T rows, or this rank's local_rows(T) under sequence parallelism (`local`).
  void embedding_forward(bf16* out, const int32_t* ids, const bf16* wte, int T, bool local = false);
  // dout [rows, C] as embedding_forward's out.
  void embedding_backward(float* dwte, const bf16* dout, const int32_t* ids, int T, bool local = false);
  // Sequence parallelism: full [T, C] from every rank's local rows.
  void gather_rows(const bf16* local, bf16* full, int T);
  void lm_head_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                       const int32_t* targets, int T, float temperature, int chunk_v);
  // dh += the head's input gradient summed over the group: [T, C], or this rank's local rows when `local` (dh must
  // hold no other rank's partial sums).
  void lm_head_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                        const bf16* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                        float temperature, int chunk_v, bool local = false);

  // ---- generation ----
  // Logits [R, V] fp32 over the whole vocabulary on every rank: this rank's slice (h [R, C] times its rows of w),
  // all-gathered, the padding columns dropped. Every rank then holds the same rows, so every rank's sampler picks
  // the same tokens as one rank would. The staging is sized by reserve_logits(), outside any graph capture.
  void reserve_logits(int max_rows);
  void lm_head_logits(float* logits, const bf16* h, const bf16* w, int R);
  // The smallest value of v over the group (host value; collective): sizes that must agree, such as the KV blocks.
  int64_t min_over_group(int64_t v);
  // Waits for the stream (under NCCL's watchdog when the group is an NcclComm); what names the work waited for.
  void synchronize(const std::string& what);

  // ---- gradients (device fp32, the shard's flat layout) ----
  // Sums the partial gradients of the q/k norm weights (shared by every rank's heads), of the other norm weights
  // under sequence parallelism (every rank normed its own tokens) and of a KV head replicated over tp / Hkv ranks
  // over the group, in place. Collective.
  void sum_partial_gradients(float* grads);
  // Sum of squares of g (the shard's flat buffer) at offsets [begin, begin + n), each parameter weighted by
  // 1 / (the ranks that hold the same values): summed over the group, every value counts once. Local; it waits for
  // the stream.
  double weighted_sum_squares(const float* g, int64_t begin, int64_t n) const;
  // The sum of every rank's x (host value; collective).
  double sum_over_group(double x);
  // The clipping norm of an optimizer on this shard: weighted_sum_squares, summed over the group.
  ShardedNorm sharded_norm();

 private:
  // The layer hooks of whole rows: the all-reduce of the partial sums.
  class WholeRows final : public LayerCollectives<bf16> {
   public:
    explicit WholeRows(GpuTensorParallel& tp) : tp_(tp) {}
    void gather_sequence(const bf16*, bf16*, int64_t) override;
    void reduce_row_parallel_output(bf16* y, bf16* out, int64_t n) override;
    void reduce_column_parallel_input_grad(bf16* dx, bf16* out, int64_t n) override {
      reduce_row_parallel_output(dx, out, n);
    }

   private:
    GpuTensorParallel& tp_;
  };

  void all_reduce_bf16(bf16* x, int64_t n);
  bf16* rows_scratch(int64_t n);  // [T, C] of the embedding and the LM head's input gradient
  // One host value through the device scalar: all-reduced with op (sum or min) over the group.
  template <typename T>
  T scalar_all_reduce(T x, bool min);
  int vocab_valid() const;

  DeviceComm& tp_;
  const cuda::GpuContext& ctx_;
  ShardLayout layout_;
  WholeRows whole_rows_;
  std::unique_ptr<GpuSequenceParallel> sequence_;  // under sequence parallelism
  DeviceArray<float> stats_, max_, kv_whole_, logits_stage_;
  DeviceArray<double> scalar_;
  DeviceArray<bf16> rows_, dh_local_;
};

}  // namespace hone

#endif  // HONE_CUDA
