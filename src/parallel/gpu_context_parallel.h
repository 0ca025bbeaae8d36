// Context parallelism on the GPU engine: the GPU twin of ContextParallel (parallel/context_parallel.h). The split of
// each packed batch is the same host computation (split_for_context_parallel); its segments and row maps are copied
// to the device, where the ring attention (parallel/gpu_ring_attention.h) reads the segments and the transformer
// moves its per-row values: the logprobs and entropies of this rank's rows all-gathered over the cp group's device
// Comm (NCCL) into the caller's rows, and the caller's gradients back to this rank's rows. Everything runs on the
// context's stream.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "parallel/context_parallel.h"

namespace hone {

class GpuContextParallel {
 public:
  // cp: the group's device Comm (an NcclComm whose synchronous collectives run on ctx's stream, or a test's pair of
  // ranks on one GPU); both must outlive this object.
  GpuContextParallel(Comm& cp, const cuda::GpuContext& ctx) : cp_(cp), ctx_(ctx) {}
  GpuContextParallel(const GpuContextParallel&) = delete;
  GpuContextParallel& operator=(const GpuContextParallel&) = delete;

  Comm& comm() const { return cp_; }
  int size() const { return cp_.size(); }
  int rank() const { return cp_.rank(); }

  // Splits batch for this rank (host) and copies the segments and row maps to the device (the host must not touch
  // the previous split's arrays while the stream may still read them: the caller synchronizes before it splits).
  const ContextParallelSplit& split(const PackedBatch& batch, int multiple = 1);
  const ContextParallelSplit& current() const { return split_; }
  // The ring blocks' segments with device arrays (ContextParallelSplit::earlier/later).
  AttentionSegments earlier() const;
  AttentionSegments later() const;

  // Collective, on the stream: full[T] (device, the caller's rows) from every rank's local[local T] values.
  void gather_rows(const float* local, float* full);
  // This rank's rows of full[T] (0 on padding rows), on the stream.
  void take_local_rows(const float* full, float* local) const;

 private:
  Comm& cp_;
  const cuda::GpuContext ctx_;
  ContextParallelSplit split_;
  std::vector<int32_t> gathered_;       // the caller's row of every all-gathered row
  DeviceArray<int32_t> segments_;       // seq_start, seq_len, half_len, second_start: [4][capacity]
  int64_t segment_capacity_ = 0;
  DeviceArray<int32_t> local_rows_;     // split_.global_row
  DeviceArray<int32_t> gathered_rows_;  // gathered_
  DeviceArray<float> all_;              // [cp x local T] all-gathered values
};

}  // namespace hone

#endif  // HONE_CUDA
