// What the GPU policy engine needs of its optimizer, whichever data-parallel form it takes:
//
//   GpuDataParallelAdamW  (train/gpu_data_parallel_adamw.h)  plain: gradients all-reduced, every rank holds the
//                         whole fp32 master weights and Adam moments; with no communicator it is one GPU's AdamW.
//   GpuDistributedAdamW   (train/gpu_distributed_adamw.h)    ZeRO-1: gradients reduce-scattered, master weights and
//                         moments sharded over the data-parallel ranks, bf16 weights all-gathered.
//
// One optimizer step is update() (reduce unless a GradReducer already did, clip by the global norm, AdamW) followed
// by refit() (the bf16 compute weights from the fp32 master weights: a cast, plus the all-gather for ZeRO-1). The
// two are apart so that the colocated engine casts once per GRPO step, in its refit phase, unless more optimizer
// steps follow in the same GRPO step (then their forward needs the new weights at once).
//
// Also here: the bucket interface a GradReducer (train/grad_reducer.h) drives, and the bucket layout of a model.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "comm/nccl_comm.h"
#include "cuda/ops_cuda.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "train/gpu_optimizer.h"
#include "train/grad_clip.h"
#include "train/zero_layout.h"

namespace hone {

struct GpuDataParallelOptions {
  bool grad_reduce_in_fp32 = true;           // train.grad_reduce_in_fp32
  int64_t bucket_bytes = int64_t(25) << 20;  // fp32 gradient bytes per bucket (about; buckets start at layers)
  // Tensor parallelism: the model's parameters are this rank's shard; the clipping norm spans the group.
  ShardedNorm norm;
  // Expert parallelism: the flat buffer's [expert_begin, num_params) are this rank's experts, whose gradients are
  // summed over the expert-data-parallel group edp (null: a group of one) instead of dp. -1: no experts there.
  int64_t expert_begin = -1;
  NcclComm* edp = nullptr;
};

// What a GradReducer needs from an optimizer: its buckets and a way to launch one bucket's reduction.
class GpuGradientBuckets {
 public:
  virtual ~GpuGradientBuckets() = default;
  virtual const ZeroLayout& zero_layout() const = 0;
  // Enqueues the reduction of bucket b (index into zero_layout().buckets()) on stream.
  virtual NcclWork reduce_bucket(int b, cudaStream_t stream) = 0;
  // The gradients of this step are reduced (by the caller): the next update() does not reduce them again.
  virtual void mark_reduced() = 0;
};

class GpuDataParallelOptimizer : public GpuGradientBuckets {
 public:
  // Whether gradients travel between ranks at all (more than one data-parallel rank).
  virtual bool reduces() const = 0;
  virtual int64_t num_params() const = 0;

  // The fp32 gradient buffer backward accumulates into (at least num_params elements; padding stays zero).
  // release_grads() frees it between steps (gradients are zero then: the KV cache of generation takes the memory);
  // zero_grads() allocates it again when released. grads() is valid only while allocated.
  virtual float* grads() const = 0;
  virtual void zero_grads() = 0;  // asynchronous on the context's stream
  virtual void release_grads() = 0;

  // Collective over dp: reduce (unless done), clip to max_norm (0: off), AdamW with learning rate lr on the master
  // weights this rank keeps. The compute weights are unchanged until refit().
  virtual GpuStepResult update(float lr, double max_norm) = 0;
  // Collective over dp: bf16 compute weights ([num_params] device) from the master weights.
  virtual void refit(bf16* compute_weights) = 0;
  GpuStepResult step(float lr, double max_norm, bf16* compute_weights) {
    const GpuStepResult r = update(lr, max_norm);
    refit(compute_weights);
    return r;
  }

  virtual int step_count() const = 0;
  virtual void set_step_count(int s) = 0;

  // train.optimizer_offload: this rank's Adam moments wait in pinned host memory (their device memory freed)
  // until reload_state(). Synchronous.
  virtual void offload_state() = 0;
  virtual void reload_state() = 0;
  virtual bool state_offloaded() const = 0;
  // Device bytes held now: master weights, gradients (unless released), moments (unless offloaded), staging.
  virtual size_t device_bytes() const = 0;

  // Checkpoints hold the dp-independent state. read_state is collective over dp: on rank `root` it fills the
  // whole fp32 master weights and moments (host, [num_params]; master resized by the caller's layout), elsewhere
  // the pointers may be null and nothing is copied to the host. write_state: every rank passes the whole state
  // (each keeps its part); the compute weights need a refit() after it.
  virtual void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) = 0;
  virtual void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                           int step_count) = 0;
};

// Where backward's gradients are final: element k (k = 0 .. L-1) is the start of layer L-1-k, whose hook call
// (GpuTransformer::set_backward_layer_hook) means every element at or above it is final (the later layers, the
// final norm and an untied LM head); the last element, 0, goes with the final call (layer -1: the embeddings).
std::vector<int64_t> backward_ready_offsets(const ParamLayout& layout);
// Bucket starts for a model: buckets follow the reverse layer order of backward (see GradReducer).
std::vector<int64_t> model_bucket_starts(const ParamLayout& layout, int dp, int64_t bucket_bytes);

// A copy of ctx that enqueues on stream s.
inline cuda::GpuContext on_stream(const cuda::GpuContext& ctx, cudaStream_t s) {
  cuda::GpuContext c = ctx;
  c.stream = s;
  return c;
}

// Waits for every work (the NCCL watchdog applies) and clears the list.
void wait_works(std::vector<NcclWork>& works);

}  // namespace hone

#endif  // HONE_CUDA
