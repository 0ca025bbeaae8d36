// AdamW over a flat fp32 buffer in a backend's memory (B: CpuBackend, or CudaBackend in a CUDA build): fp32 first
// and second moments, a step count, and weight decay that (as in Megatron-LM and NeMo-RL's Megatron backend) skips
// 1-D parameters: biases and norm weights are not decayed. The update runs segment by segment (runs of parameters
// with one decay setting); a segment names where its values lie in the master weights and moments (the state) and
// in the gradients, which differ for a ZeRO-1 shard (train/zero_layout.h) and coincide otherwise.
//
// train.optimizer_offload: offload_state() moves the moments out of the backend's memory until reload_state()
// (backend/optimizer_ops.h's policy: pinned host memory on the GPU; nothing moves on the CPU, already host memory).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/weights.h"

namespace hone {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  bool decay_1d_params = false;  // true: decay every parameter (PyTorch AdamW on all parameters)
};

// A contiguous run of the flat buffer with one weight-decay setting.
struct ParamSegment {
  int64_t offset = 0;
  int64_t size = 0;
  bool decay = true;
};

// A run of the optimizer state with one weight-decay setting: state[shard_offset + i] (master weights, moments)
// goes with gradient[flat_offset + i]. The whole buffer's segments have the two offsets equal.
struct ShardSegment {
  int64_t flat_offset = 0;
  int64_t shard_offset = 0;
  int64_t size = 0;
  bool decay = true;
};

// Decay segments for a model: merges adjacent parameters with the same decay setting.
std::vector<ParamSegment> weight_decay_segments(const ModelWeights& params, bool decay_1d_params);
// The same segments over the whole buffer as state segments (both offsets equal).
std::vector<ShardSegment> whole_buffer_segments(const std::vector<ParamSegment>& segments);

template <typename B>
class AdamW {
 public:
  using Exec = typename B::Exec;
  // Moments of n values, zero; segments inside [0, n) of the state. The Exec's context must outlive the optimizer.
  AdamW(std::vector<ShardSegment> segments, int64_t n, AdamWConfig config, Exec x = {});
  // Segments covering [0, n) of the whole buffer.
  AdamW(const std::vector<ParamSegment>& segments, int64_t n, AdamWConfig config, Exec x = {});
  // Segments from the model's named parameters (1-D ones undecayed unless config.decay_1d_params).
  AdamW(const ModelWeights& params, AdamWConfig config, Exec x = {});
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;

  // One update with learning rate lr (both buffers in B's memory): increments the step count, then
  // master -= lr * (adam + wd * master), segment by segment.
  void step(float* master, const float* grads, float lr);

  int64_t size() const { return n_; }
  int step_count() const { return step_; }
  void set_step_count(int s) { step_ = s; }  // when resuming from a checkpoint
  float* exp_avg() const { return m_.get(); }     // first moment, [size] in B's memory (null while offloaded)
  float* exp_avg_sq() const { return v_.get(); }  // second moment
  const std::vector<ShardSegment>& segments() const { return segments_; }

  // Synchronous; each a no-op when already done (and both no-ops where the policy keeps the moments in place).
  void offload_state();
  void reload_state();
  bool state_offloaded() const { return held_; }
  size_t bytes() const { return m_.bytes() + v_.bytes(); }  // the moments' bytes in B's memory now

 private:
  std::vector<ShardSegment> segments_;
  AdamWConfig config_;
  Exec x_;
  int64_t n_;
  typename B::template Array<float> m_, v_;
  typename B::template HostStaging<float> host_m_, host_v_;  // allocated at the first offload, then kept
  bool held_ = false;
  int step_ = 0;
};

}  // namespace hone
