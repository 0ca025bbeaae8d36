// GpuDistributedAdamW: the distributed optimizer (ZeRO-1) on the GPU over an NcclComm of the data-parallel group,
// the device twin of train/distributed_adamw.h's DistributedAdamW.
//
// The flat fp32 gradient buffer (padded to a multiple of dp) is reduce-scattered bucket by bucket
// (train/zero_layout.h) IN PLACE: rank r's reduced chunk of bucket b stays where it lies in the buffer. Each rank
// keeps fp32 master weights and Adam moments of its shard only; global norm = sqrt(all_reduce(sum of squares of the
// reduced chunks)); clipping; AdamW on the shard (1-D parameters undecayed, segments cut at the shard's edges).
// refit() casts the shard to bf16 straight into its place in the compute weights and all-gathers them in place.
// No shard-sized staging: per rank the state is 4 bytes of gradient per parameter plus 12 bytes per parameter of
// the shard (master, two moments), and one bucket of bf16 staging.
//
// Gradients are summed over the ranks (the loss is divided by the global denominator). grad_reduce_in_fp32 = false
// sends them as bf16 (converted, reduced by NCCL, converted back). The reduction runs inside update() unless a
// GradReducer already launched it, overlapped with the last micro-batch's backward.
//
// Checkpoints (as the CPU twin): read_state() all-gathers master weights and moments bucket by bucket to the root's
// host memory; write_state() restores under any dp. shard_state() / load_shard_state() keep one rank's shard (same
// dp size).
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "train/adamw.h"
#include "train/distributed_adamw.h"
#include "train/gpu_data_parallel_optimizer.h"

namespace hone {

class GpuDistributedAdamW final : public GpuDataParallelOptimizer {
 public:
  // weights: the host fp32 initial weights (the master shard is taken from them). ctx and dp must outlive it.
  GpuDistributedAdamW(const ModelWeights& weights, const ParamLayout& layout, AdamWConfig config,
                      const cuda::GpuContext& ctx, NcclComm& dp, GpuDataParallelOptions options = {});

  bool reduces() const override { return zl_.dp() > 1; }
  int64_t num_params() const override { return zl_.num_params(); }
  // [padded_size] device fp32.
  float* grads() const override { return grads_.get(); }
  void zero_grads() override;
  void release_grads() override { grads_ = DeviceArray<float>(); }

  GpuStepResult update(float lr, double max_norm) override;
  void refit(bf16* compute_weights) override;

  const ZeroLayout& zero_layout() const override { return zl_; }
  NcclWork reduce_bucket(int b, cudaStream_t stream) override;
  void mark_reduced() override { reduced_ = true; }

  int step_count() const override { return step_; }
  void set_step_count(int s) override { step_ = s; }
  void offload_state() override;
  void reload_state() override;
  bool state_offloaded() const override { return host_.held(); }
  size_t device_bytes() const override;

  void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) override;
  void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                   int step_count) override;

  // Collective: the full fp32 master weights on every rank.
  void download_master(ModelWeights& w);
  ShardOptimizerState shard_state() const;
  void load_shard_state(const ShardOptimizerState& s);

 private:
  void reduce_all();
  // Collective: the whole [num_params] buffer of a shard (master or a moment) into host `full` on root only.
  void gather_to_host(const float* shard, float* full, int root);
  void scatter_from_host(const float* full, float* shard);

  cuda::GpuContext ctx_;
  NcclComm& dp_;
  AdamWConfig config_;
  GpuDataParallelOptions options_;
  ZeroLayout zl_;
  std::vector<ShardSegment> segments_;
  int64_t max_bucket_ = 0;
  DeviceArray<float> grads_, master_, m_, v_;
  DeviceArray<bf16> send_bf_;            // bf16 reduction staging (one bucket)
  DeviceArray<bf16> tail_bf_;            // the bucket holding the padding, gathered here and its real part copied
  DeviceArray<char> scalar_;             // one double (the sum of squares)
  HostMoments host_;
  bool reduced_ = false;
  int step_ = 0;
};

}  // namespace hone

#endif  // HONE_CUDA
