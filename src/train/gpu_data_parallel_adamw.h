// GpuDataParallelAdamW: the plain data-parallel optimizer on the GPU, the device twin of train/distributed_adamw.h's
// DataParallelAdamW. Gradients are all-reduced over an NcclComm of the data-parallel group bucket by bucket (in
// fp32, or as bf16 with grad_reduce_in_fp32 = false: converted, reduced, converted back), then GpuAdamW clips and
// updates the whole fp32 master weights on every rank. With no communicator (or one rank) nothing is reduced: it
// is one GPU's AdamW. The reduction runs inside update() unless a GradReducer already launched it, overlapped with
// the last micro-batch's backward.
#pragma once

#if HONE_CUDA

#include <cstdint>

#include "train/adamw.h"
#include "train/gpu_data_parallel_optimizer.h"
#include "train/gpu_optimizer.h"

namespace hone {

class GpuDataParallelAdamW final : public GpuDataParallelOptimizer {
 public:
  // weights: the host fp32 initial weights (the master weights). dp may be null (one GPU); ctx and dp must outlive
  // the optimizer.
  GpuDataParallelAdamW(const ModelWeights& weights, const ParamLayout& layout, AdamWConfig config,
                       const cuda::GpuContext& ctx, NcclComm* dp, GpuDataParallelOptions options = {});

  GpuAdamW& adamw() { return adamw_; }  // master(), moments, load_master, download_master, ...

  bool reduces() const override { return dp_ && dp_->size() > 1; }
  int64_t num_params() const override { return adamw_.num_params(); }
  float* grads() const override { return adamw_.grads(); }
  void zero_grads() override { adamw_.zero_grads(); }
  void release_grads() override { adamw_.release_grads(); }

  GpuStepResult update(float lr, double max_norm) override;
  void refit(bf16* compute_weights) override { adamw_.refit(compute_weights); }

  const ZeroLayout& zero_layout() const override { return zl_; }
  NcclWork reduce_bucket(int b, cudaStream_t stream) override;
  void mark_reduced() override { reduced_ = true; }

  int step_count() const override { return adamw_.step_count(); }
  void set_step_count(int s) override { adamw_.set_step_count(s); }
  void offload_state() override { adamw_.offload_state(); }
  void reload_state() override { adamw_.reload_state(); }
  bool state_offloaded() const override { return adamw_.state_offloaded(); }
  size_t device_bytes() const override { return adamw_.device_bytes() + send_bf_.bytes(); }

  // Every rank holds the whole state: only the root copies it to the host (no communication).
  void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) override;
  void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                   int step_count) override;

 private:
  cuda::GpuContext ctx_;
  NcclComm* dp_;
  GpuDataParallelOptions options_;
  GpuAdamW adamw_;
  ZeroLayout zl_;  // dp = 1 arithmetic: buckets only
  DeviceArray<bf16> send_bf_;
  bool reduced_ = false;
};

}  // namespace hone

#endif  // HONE_CUDA
