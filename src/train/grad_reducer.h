// GradReducer: data-parallel gradient reduction overlapped with backward on the GPU. The optimizer's buckets
// (about 25 MB each, train/zero_layout.h) follow the reverse layer order; the GpuTransformer calls the reducer
// after each layer's parameter gradients are final on the compute stream (set_backward_layer_hook); the reducer
// then records an event, makes its communication stream wait on it, and launches the all-reduce (plain data
// parallelism) or reduce-scatter (ZeRO-1) of every bucket that became complete. wait_all() launches whatever is
// left, waits for every bucket (the NCCL watchdog applies) and tells the optimizer its gradients are reduced.
//
// ONLY ON THE LAST MICRO-BATCH of an optimizer step: arm() before that micro-batch's backward. Earlier
// micro-batches accumulate into the same gradient buffer locally; reducing them too would sum them more than once.
//
//   reducer.attach(model);
//   for (mb ...) { model.forward(mb); if (last) reducer.arm(); model.backward(d, nullptr, opt.grads()); }
//   reducer.wait_all();
//   opt.step(lr, max_norm, model.weights());
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "comm/nccl_comm.h"
#include "cuda/ops_cuda.h"
#include "model/transformer.h"
#include "train/gpu_data_parallel_optimizer.h"

namespace hone {

class GradReducer {
 public:
  // The optimizer's buckets should be made for this layout (model_bucket_starts) so that they launch early; any
  // bucket list is correct (a bucket launches once backward has finished all of it). ctx's stream is the compute
  // stream.
  GradReducer(GpuGradientBuckets& optimizer, const ParamLayout& layout, const cuda::GpuContext& ctx);
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Installs the layer hook on model (replacing any other hook); detach() removes it.
  void attach(GpuTransformer& model);
  void detach();

  // The next backward is the last micro-batch of the optimizer step: reduce while it runs.
  void arm();
  bool armed() const { return armed_; }
  // Launches the buckets not yet launched, waits for all, and marks the optimizer's gradients reduced. Call after
  // the armed backward (and before the optimizer step). Without arm() it reduces everything now.
  void wait_all();

  int buckets_launched_during_backward() const { return launched_in_backward_; }

 private:
  void on_layer_done(int layer);
  void launch_until(int64_t frontier);  // launches every bucket with offset >= frontier

  GpuGradientBuckets& opt_;
  cuda::GpuContext ctx_;
  std::vector<int64_t> layer_start_;  // per layer
  GpuTransformer* model_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  std::vector<cudaEvent_t> events_;  // one per hook call of a backward (L + 1)
  size_t next_event_ = 0;
  size_t next_bucket_ = 0;
  std::vector<NcclWork> works_;
  bool armed_ = false;
  int launched_in_backward_ = 0;
};

}  // namespace hone

#endif  // HONE_CUDA
