// AdamW over the model's flat fp32 parameter buffer: fp32 master weights, fp32 first and second moments, a step
// count, and weight decay that (as in Megatron-LM and NeMo-RL's Megatron backend) skips 1-D parameters: biases
// and norm weights are not decayed.
#pragma once

#include <cstdint>
#include <vector>

#include "model/weights.h"
#include "tensor/tensor.h"

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

class AdamW {
 public:
  // Segments cover [0, num_params) of the flat buffers that step() updates.
  AdamW(std::vector<ParamSegment> segments, int64_t num_params, AdamWConfig config);
  // Segments from the model's named parameters (1-D ones undecayed unless config.decay_1d_params).
  AdamW(const ModelWeights& params, AdamWConfig config);

  // One update with learning rate lr: increments the step count, then param -= lr * (adam + wd * param).
  void step(float* params, const float* grads, float lr);
  void step(ModelWeights& params, const ModelWeights& grads, float lr) { step(params.flat.f32(), grads.flat.f32(), lr); }

  int step_count() const { return step_; }
  void set_step_count(int s) { step_ = s; }  // when resuming from a checkpoint
  Tensor& exp_avg() { return m_; }           // first moment, [num_params]
  Tensor& exp_avg_sq() { return v_; }        // second moment
  const std::vector<ParamSegment>& segments() const { return segments_; }

 private:
  std::vector<ParamSegment> segments_;
  AdamWConfig config_;
  Tensor m_, v_;
  int step_ = 0;
};

// Decay segments for a model: merges adjacent parameters with the same decay setting.
std::vector<ParamSegment> weight_decay_segments(const ModelWeights& params, bool decay_1d_params);

}  // namespace hone
