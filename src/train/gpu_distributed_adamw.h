// Data-parallel optimizers on the GPU over an NcclComm of the data-parallel group; the device twins of
// train/distributed_adamw.h:
//
//   GpuDistributedAdamW  ZeRO-1: the flat fp32 gradient buffer (padded to a multiple of dp) is reduce-scattered
//                        bucket by bucket (train/zero_layout.h); each rank keeps fp32 master weights and Adam
//                        moments of its shard only; global norm = sqrt(all_reduce(sum of squares of the shard));
//                        clipping; AdamW on the shard (1-D parameters undecayed, segments cut at the shard's
//                        edges); the updated shard is cast to bf16 and all-gathered into the bf16 compute weights.
//   GpuDataParallelAdamW the plain variant: all-reduce of the gradients (bucket by bucket), then GpuAdamW.
//
// Gradients are summed over the ranks (the loss is divided by the global denominator). grad_reduce_in_fp32 = false
// sends them as bf16 (converted, reduced by NCCL, converted back). The reduction runs inside step() unless a
// GradReducer (train/grad_reducer.h) already launched it, overlapped with the last micro-batch's backward.
//
// Checkpoints (as the CPU twin): full_state() all-gathers the moments bucket by bucket into host memory (every
// rank; rank 0 writes), download_master() the fp32 master weights; load_full_state() restores under any dp.
// shard_state() / load_shard_state() keep one rank's shard (same dp size).
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "cuda/nccl_comm.h"
#include "cuda/ops_cuda.h"
#include "model/gpu_transformer.h"
#include "model/weights.h"
#include "train/adamw.h"
#include "train/distributed_adamw.h"
#include "train/gpu_optimizer.h"
#include "train/zero_layout.h"

namespace hone {

struct GpuDataParallelOptions {
  bool grad_reduce_in_fp32 = true;         // train.grad_reduce_in_fp32
  int64_t bucket_bytes = int64_t(25) << 20;  // fp32 gradient bytes per bucket (about)
};

// What a GradReducer needs from an optimizer: its buckets and a way to launch one bucket's reduction.
class GpuGradientBuckets {
 public:
  virtual ~GpuGradientBuckets() = default;
  virtual const ZeroLayout& zero_layout() const = 0;
  // Enqueues the reduction of bucket b (index into zero_layout().buckets()) on stream.
  virtual NcclWork reduce_bucket(int b, cudaStream_t stream) = 0;
  // The gradients of this step are reduced (by the caller): the next step() does not reduce them again.
  virtual void mark_reduced() = 0;
};

// Where backward's gradients are final: element k (k = 0 .. L-1) is the start of layer L-1-k, whose hook call
// (GpuTransformer::set_backward_layer_hook) means every element at or above it is final (the later layers, the
// final norm and an untied LM head); the last element, 0, goes with the final call (layer -1: the embeddings).
std::vector<int64_t> backward_ready_offsets(const GpuParamLayout& layout);
// Bucket starts for a model: buckets follow the reverse layer order of backward (see GradReducer).
std::vector<int64_t> model_bucket_starts(const GpuParamLayout& layout, int dp, int64_t bucket_bytes);

class GpuDistributedAdamW : public GpuGradientBuckets {
 public:
  // weights: the host fp32 initial weights (the master shard is taken from them). ctx and dp must outlive it.
  GpuDistributedAdamW(const ModelWeights& weights, const GpuParamLayout& layout, AdamWConfig config,
                      const cuda::GpuContext& ctx, NcclComm& dp, GpuDataParallelOptions options = {});

  // The gradient buffer backward accumulates into: [padded_size] device fp32 (the padding stays zero).
  float* grads() const { return grads_.get(); }
  void zero_grads();  // asynchronous on the context's stream

  // Reduce (unless already done) + clip + AdamW on the shard + all-gather of bf16 weights into compute_weights
  // ([num_params] device). Collective over dp; returns after the all-gather completed.
  GpuStepResult step(float lr, double max_norm, bf16* compute_weights);

  const ZeroLayout& zero_layout() const override { return zl_; }
  NcclWork reduce_bucket(int b, cudaStream_t stream) override;
  void mark_reduced() override { reduced_ = true; }

  float* master_shard() const { return master_.get(); }
  float* exp_avg_shard() const { return m_.get(); }
  float* exp_avg_sq_shard() const { return v_.get(); }
  float* grad_shard() const { return gshard_.get(); }  // reduced gradients of this rank's shard
  int step_count() const { return step_; }
  void set_step_count(int s) { step_ = s; }

  void download_master(ModelWeights& w);  // collective: the full fp32 master weights on every rank
  FullOptimizerState full_state();         // collective
  void load_full_state(const FullOptimizerState& s, const ModelWeights& weights);
  ShardOptimizerState shard_state() const;
  void load_shard_state(const ShardOptimizerState& s);

 private:
  void reduce_all();
  std::vector<float> gather_to_host(const float* shard);  // collective, [num_params]
  void scatter_from_host(const float* full, float* shard);

  cuda::GpuContext ctx_;
  NcclComm& dp_;
  AdamWConfig config_;
  GpuDataParallelOptions options_;
  ZeroLayout zl_;
  std::vector<ShardSegment> segments_;
  int64_t max_bucket_ = 0;
  DeviceArray<float> grads_, master_, m_, v_, gshard_;
  DeviceArray<bf16> wshard_bf_;                   // the updated shard in bf16, for the all-gather
  DeviceArray<bf16> send_bf_, recv_bf_, tail_bf_;  // bf16 reduction staging; the padded last bucket's gather
  DeviceArray<char> scalar_;  // one double (the sum of squares)
  bool reduced_ = false;
  int step_ = 0;
};

class GpuDataParallelAdamW : public GpuGradientBuckets {
 public:
  GpuDataParallelAdamW(const ModelWeights& weights, const GpuParamLayout& layout, AdamWConfig config,
                       const cuda::GpuContext& ctx, NcclComm& dp, GpuDataParallelOptions options = {});

  GpuAdamW& adamw() { return adamw_; }  // grads(), master(), moments, load_master, ...
  float* grads() const { return adamw_.grads(); }
  // Reduce (unless already done) + GpuAdamW::step (clip, AdamW, refit into compute_weights).
  GpuStepResult step(float lr, double max_norm, bf16* compute_weights);

  const ZeroLayout& zero_layout() const override { return zl_; }
  NcclWork reduce_bucket(int b, cudaStream_t stream) override;
  void mark_reduced() override { reduced_ = true; }

 private:
  cuda::GpuContext ctx_;
  NcclComm& dp_;
  GpuDataParallelOptions options_;
  GpuAdamW adamw_;
  ZeroLayout zl_;  // dp = 1 arithmetic: buckets only
  DeviceArray<bf16> send_bf_;
  bool reduced_ = false;
};

}  // namespace hone

#endif  // HONE_CUDA
