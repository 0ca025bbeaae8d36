// This rank's stage of a pipelined model on the GPU engine: the twin of parallel/pipeline_model.h over a device
// Comm of the pipeline group (an NcclComm on the engine's stream). Its chunks are spans of GpuTransformer
// (model/model_span.h) over one shared bf16 weight buffer, a pool per chunk (each holds one micro-batch's
// activations), device buffers for the hidden states and gradients that arrive (bf16 [T, C]), and the loss's
// gradients of each micro-batch kept on the last stage until its backward. The same executor and schedules as the
// CPU engine (parallel/pipeline_executor.h); every kernel and transfer is ordered on the engine's stream.
#pragma once

#if HONE_CUDA

#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "cuda/device_memory.h"
#include "model/gpu_transformer.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/shard_layout.h"

namespace hone {

class GpuTensorParallel;

class GpuPipelineModel {
 public:
  // stage: this rank's layout; weights: the stage's bf16 weights on the device (shared by every chunk's models;
  // set_weights when they move); pp: a device Comm of the pipeline group ordered on ctx's stream; tp may be null.
  // max_tokens: the largest micro-batch (buffers grow for a larger one). All must outlive this object.
  GpuPipelineModel(const ModelConfig& c, const ShardLayout& stage, bf16* weights, const cuda::GpuContext& ctx,
                   int max_tokens, GpuTensorParallel* tp, Comm& pp);

  void set_recompute(Recompute r);
  void set_recompute(bool on) { set_recompute(on ? Recompute::full : Recompute::none); }
  void set_weights(bf16* weights);
  const PipelineLayout& pipeline() const { return stage_.pipeline(); }
  bool last_stage() const { return stage_.holds_head(); }

  // The loss of micro-batch mb on the last stage after its forward: reads head.logprobs() / head.entropy() (device)
  // and returns the device gradients (dentropy may be null), valid until the next call (they are copied).
  struct LossGrads {
    const float* dlogprob = nullptr;
    const float* dentropy = nullptr;
  };
  using Loss = std::function<LossGrads(int mb, const GpuTransformer& head)>;
  // Called with the model that runs this rank's last backward of the pass, just before it (a GradReducer arms on
  // it: the data-parallel reduction overlaps that backward). May be empty.
  using BeforeLastBackward = std::function<void(GpuTransformer&)>;
  // One optimizer step's micro-batches forward and backward; gradients accumulate into grads (device fp32, this
  // stage's layout). Collective over pp (and tp).
  PipelineRunStats train(const std::vector<const PackedBatch*>& batches, float temperature, const Loss& loss,
                         float* grads, const BeforeLastBackward& before_last_backward = {});
  // The forward-only pass: on the last stage out[mb] gets batch mb's logprobs [T] (host); out is left alone elsewhere.
  PipelineRunStats logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                            std::vector<std::vector<float>>& out);
  const PipelineSchedule& last_schedule() const { return schedule_; }

  // Frees every model's arenas and the message buffers (generation takes the memory).
  void release();
  // Device bytes held by the models' arenas and the buffers.
  size_t device_bytes() const;
  // The activations of the most micro-batches this stage keeps alive under its schedule, each of T tokens.
  size_t activation_bytes_bound(int T) const;

 private:
  class Work;
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  struct Chunk {
    ModelSpan span;
    std::vector<std::unique_ptr<GpuTransformer>> pool;
    std::vector<int> free;
  };
  PipelineRunStats run(const std::vector<const PackedBatch*>& batches, bool forward_only, Work& work);

  ModelConfig c_;
  ShardLayout stage_;
  bf16* weights_;
  cuda::GpuContext ctx_;
  int max_tokens_;
  GpuTensorParallel* tp_;
  Comm& pp_;
  Recompute recompute_ = Recompute::none;
  std::vector<Chunk> chunks_;
  PipelineSchedule schedule_;
  std::vector<DeviceArray<bf16>> spare_;    // message buffers of max_tokens x C, reused
  std::vector<DeviceArray<float>> spare_f_;  // loss gradient buffers of 2 x max_tokens, reused
};

}  // namespace hone

#endif  // HONE_CUDA
