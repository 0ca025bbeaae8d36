// AdamW on the device over the model's flat parameter buffer: fp32 master weights, fp32 gradients and fp32 Adam
// moments, all [num_params] in the allocate_weights layout. One step = global-norm clipping (cuda::sum_squares,
// cuda::scale_inplace) + AdamW (cuda::adamw_update per weight-decay segment: 1-D parameters undecayed, as the CPU
// AdamW) + refit (cuda::refit_cast into the bf16 compute weights). The device twin of train/adamw.h.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "cuda/ops_cuda.h"
#include "train/grad_clip.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "train/adamw.h"

namespace hone {

// Pinned host copies of the two Adam moments while their device memory is freed (train.optimizer_offload); the
// pinned buffers are allocated at the first offload and kept. Both calls are synchronous.
class HostMoments {
 public:
  HostMoments() = default;
  ~HostMoments();
  HostMoments(const HostMoments&) = delete;
  HostMoments& operator=(const HostMoments&) = delete;

  void offload(DeviceArray<float>& m, DeviceArray<float>& v, cudaStream_t stream);  // m, v freed after
  void reload(DeviceArray<float>& m, DeviceArray<float>& v, int64_t n, cudaStream_t stream);
  bool held() const { return held_; }

 private:
  float* m_ = nullptr;
  float* v_ = nullptr;
  bool held_ = false;
};

struct GpuStepResult {
  double grad_norm = 0;  // before clipping
  float clip_coef = 1.f;
  bool skipped = false;  // the norm was not finite: weights, moments and step count untouched
};

class GpuAdamW {
 public:
  // Segments from the model's named parameters (weight_decay_segments); moments and gradients start at zero,
  // master weights uninitialized until load_master() or a copy into master(). The context must outlive it.
  GpuAdamW(const ModelWeights& layout, AdamWConfig config, const cuda::GpuContext& ctx);
  GpuAdamW(const GpuAdamW&) = delete;
  GpuAdamW& operator=(const GpuAdamW&) = delete;

  int64_t num_params() const { return n_; }
  float* master() const { return master_.get(); }
  float* grads() const { return grads_.get(); }
  float* exp_avg() const { return m_.get(); }
  float* exp_avg_sq() const { return v_.get(); }

  void load_master(const ModelWeights& w);                // host fp32 -> device master
  void download_master(ModelWeights& w) const;            // device master -> host fp32 (synchronizes)
  void zero_grads();                                      // asynchronous; allocates released gradients again
  // Frees the gradient buffer (between steps, when gradients are zero: colocated generation takes the memory).
  void release_grads() { grads_ = DeviceArray<float>(); }

  // Global L2 norm of the gradients (synchronizes), then scales them by clip_coefficient(norm, max_norm). Under
  // tensor parallelism norm weighs this shard's values and sums over the group (ShardedNorm).
  GpuStepResult clip(double max_norm, const ShardedNorm& norm = {});
  // Increments the step count, then one AdamW update of the master weights with learning rate lr.
  void adamw(float lr);
  // bf16 compute weights from the master weights.
  void refit(bf16* compute_weights);
  // clip + adamw + refit.
  GpuStepResult step(float lr, double max_norm, bf16* compute_weights);

  // train.optimizer_offload: the Adam moments go to pinned host memory and their device memory is freed (during
  // generation); reload_state() brings them back. Synchronous.
  void offload_state();
  void reload_state();
  bool state_offloaded() const { return host_.held(); }
  // Bytes of device memory held now (master, gradients, moments unless offloaded).
  size_t device_bytes() const { return master_.bytes() + grads_.bytes() + m_.bytes() + v_.bytes(); }

  int step_count() const { return step_; }
  void set_step_count(int s) { step_ = s; }
  const std::vector<ParamSegment>& segments() const { return segments_; }

 private:
  int64_t n_;
  std::vector<ParamSegment> segments_;
  AdamWConfig config_;
  cuda::GpuContext ctx_;
  DeviceArray<float> master_, grads_, m_, v_;
  HostMoments host_;
  int step_ = 0;
};

}  // namespace hone

#endif  // HONE_CUDA
