// Tensor parallelism on the GPU engine: the twin of parallel/tensor_parallel.h over a device Comm of the tp group
// (an NcclComm on the context's stream, or any Comm whose buffers are device memory). What crosses ranks is the
// same as on the CPU: the layer hooks' all-reduces of bf16 [T, C] partial sums, the vocabulary-parallel
// embedding's all-reduce, the LM head's per-token statistics (all-reduce max of T floats, sum of 3T floats) and its
// input gradient; the partial gradients of parameters several ranks hold, and the gradient norm over the shards.
// Whole token rows only: sequence parallelism on the GPU is not here yet (the layer body refuses it by name).
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/layer_collectives.h"
#include "model/model_config.h"
#include "parallel/shard_layout.h"
#include "train/grad_clip.h"

namespace hone {

using bf16 = cuda::bf16;

class GpuTensorParallel final : public LayerCollectives<bf16> {
 public:
  // tp (a device Comm whose collectives are ordered on ctx's stream) and ctx must outlive this object. stage: this
  // rank's pipeline stage's layout (a copy is kept; default: the whole model's shard).
  GpuTensorParallel(const ModelConfig& c, Comm& tp, const cuda::GpuContext& ctx, const ShardLayout* stage = nullptr);
  GpuTensorParallel(const GpuTensorParallel&) = delete;
  GpuTensorParallel& operator=(const GpuTensorParallel&) = delete;

  const ShardLayout& layout() const { return layout_; }
  const LayerShape& shape() const { return layout_.shape(); }
  int size() const { return tp_.size(); }
  int rank() const { return tp_.rank(); }

  // ---- layer hooks: all-reduce of bf16 partial sums, whole rows ----
  void gather_sequence(const bf16* local, bf16* full, int64_t n) override;
  void reduce_row_parallel_output(bf16* y, bf16* out, int64_t n) override;
  void reduce_column_parallel_input_grad(bf16* dx, bf16* out, int64_t n) override;

  // ---- vocabulary-parallel embedding and LM head (w, wte: this rank's slice), as TensorParallel's ----
  void embedding_forward(bf16* out, const int32_t* ids, const bf16* wte, int T);
  void embedding_backward(float* dwte, const bf16* dout, const int32_t* ids, int T);
  void lm_head_forward(float* logprob, float* entropy, float* lse, const bf16* h, const bf16* w,
                       const int32_t* targets, int T, float temperature, int chunk_v);
  // dh [T, C] += the head's input gradient summed over the group (dh must hold no other rank's partial sums).
  void lm_head_backward(bf16* dh, float* dw, const float* dlogprob, const float* dentropy, const bf16* h,
                        const bf16* w, const int32_t* targets, const float* lse, const float* entropy, int T,
                        float temperature, int chunk_v);

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
  // Sums the partial gradients of the q/k norm weights (shared by every rank's heads) and of a KV head replicated
  // over tp / Hkv ranks over the group, in place. Collective.
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
  void all_reduce_bf16(bf16* x, int64_t n);
  // One host value through the device scalar: all-reduced with op (sum or min) over the group.
  template <typename T>
  T scalar_all_reduce(T x, bool min);
  int vocab_valid() const;

  Comm& tp_;
  const cuda::GpuContext& ctx_;
  ShardLayout layout_;
  DeviceArray<float> stats_, max_, kv_whole_, logits_stage_;
  DeviceArray<double> scalar_;
  DeviceArray<bf16> dh_;
};

}  // namespace hone

#endif  // HONE_CUDA
