// Sequence parallelism's collectives beside the GEMMs, the backends' B::SequenceOverlap: where the tensor-parallel
// group (parallel/tensor_parallel.h) runs the chunks of a sequence-parallel layer hook's all-gathers and
// reduce-scatters. The group posts each chunk's collective "on the side" and orders the compute with the side
// through numbered marks (0 .. marks() - 1); it runs the GEMMs chunk by chunk as their rows arrive when split().
// Collectives "in line" run with the compute (the embedding's, the final norm's, the LM head's), in the same chunks.
//   * CpuSequenceOverlap (the CPU): every collective runs when posted, over the group's Comm; marks order nothing
//     and the GEMMs run in one piece, so the arithmetic is that of the collectives moved one after the other.
//   * CudaSequenceOverlap (a GPU over a device Comm): with overlap (parallel.tp_comm_overlap) the side is a
//     communication stream of its own and marks are events, and split() is true; without it the side is the
//     compute stream itself (the context's) and nothing needs ordering.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"

#if HONE_CUDA
#include <cuda_runtime.h>

#include "cuda/ops_cuda.h"
#endif

namespace hone {

class CpuSequenceOverlap {
 public:
  explicit CpuSequenceOverlap(Comm& comm) : comm_(comm) {}

  // Whether the hooks run their GEMMs chunk by chunk beside the collectives: never here.
  bool split() const { return false; }
  // With the compute: each rank's send_count elements gathered into recv; recv_count elements of the sum.
  void all_gather(const void* send, void* recv, int64_t send_count, CommType type) {
    comm_.all_gather_raw(send, recv, send_count, type);
  }
  void reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type) {
    comm_.reduce_scatter_sum_raw(send, recv, recv_count, type);
  }
  // On the side: run when posted.
  void post_all_gather(const void* send, void* recv, int64_t send_count, CommType type) {
    all_gather(send, recv, send_count, type);
  }
  void post_reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type) {
    reduce_scatter_sum(send, recv, recv_count, type);
  }
  // The side's next collectives follow the compute queued so far; mark i records the side's collectives so far;
  // the compute waits for mark i. Nothing to order here.
  void side_after_compute(int) {}
  void mark_side(int) {}
  void compute_after(int) {}

 private:
  Comm& comm_;
};

#if HONE_CUDA

class DeviceComm;

class CudaSequenceOverlap {
 public:
  // comm: the group's device Comm; ctx: the compute stream's context (both outlive this object). overlap: a
  // communication stream with `marks` events (the chunks of the layout and a few more); else the compute stream.
  CudaSequenceOverlap(Comm& comm, const cuda::GpuContext& ctx, bool overlap, int marks);
  ~CudaSequenceOverlap();  // waits for the communication stream
  CudaSequenceOverlap(const CudaSequenceOverlap&) = delete;
  CudaSequenceOverlap& operator=(const CudaSequenceOverlap&) = delete;

  bool split() const { return side_ != compute_; }
  void all_gather(const void* send, void* recv, int64_t send_count, CommType type);
  void reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type);
  void post_all_gather(const void* send, void* recv, int64_t send_count, CommType type);
  void post_reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type);
  // Marks are reused by every hook: a wait takes the record made just before it.
  void side_after_compute(int i);
  void mark_side(int i);
  void compute_after(int i);

 private:
  DeviceComm* comm_ = nullptr;
  cudaStream_t compute_ = nullptr;
  cudaStream_t side_ = nullptr;  // compute_ without overlap
  std::vector<cudaEvent_t> events_;
};

#endif  // HONE_CUDA

}  // namespace hone
