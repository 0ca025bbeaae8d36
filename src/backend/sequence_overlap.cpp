// The GPU's sequence-parallel collectives beside the GEMMs: a communication stream of its own (see
// sequence_overlap.h).
#include "backend/sequence_overlap.h"

#if HONE_CUDA

#include "comm/device_comm.h"
#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

CudaSequenceOverlap::CudaSequenceOverlap(Comm& comm, const cuda::GpuContext& ctx, bool overlap, int marks)
    : comm_(dynamic_cast<DeviceComm*>(&comm)), compute_(ctx.stream), side_(ctx.stream) {
  HONE_CHECK(comm_ != nullptr, "sequence parallelism on the GPU needs a device Comm");
  if (!overlap) return;
  // The collectives' kernels are few and short: a higher priority lets them start as soon as their chunk is ready
  // instead of queuing behind the GEMMs' blocks.
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&side_, cudaStreamNonBlocking, greatest));
  events_.resize(size_t(marks));
  for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
}

CudaSequenceOverlap::~CudaSequenceOverlap() {
  if (split()) cudaStreamSynchronize(side_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (split()) cudaStreamDestroy(side_);
}

void CudaSequenceOverlap::all_gather(const void* send, void* recv, int64_t send_count, CommType type) {
  comm_->all_gather_on_raw(send, recv, send_count, type, compute_);
}

void CudaSequenceOverlap::reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type) {
  comm_->reduce_scatter_sum_on_raw(send, recv, recv_count, type, compute_);
}

void CudaSequenceOverlap::post_all_gather(const void* send, void* recv, int64_t send_count, CommType type) {
  comm_->all_gather_on_raw(send, recv, send_count, type, side_);
}

void CudaSequenceOverlap::post_reduce_scatter_sum(const void* send, void* recv, int64_t recv_count, CommType type) {
  comm_->reduce_scatter_sum_on_raw(send, recv, recv_count, type, side_);
}

void CudaSequenceOverlap::side_after_compute(int i) {
  if (!split()) return;
  CUDA_CHECK(cudaEventRecord(events_.at(size_t(i)), compute_));
  CUDA_CHECK(cudaStreamWaitEvent(side_, events_[size_t(i)], 0));
}

void CudaSequenceOverlap::mark_side(int i) {
  if (split()) CUDA_CHECK(cudaEventRecord(events_.at(size_t(i)), side_));
}

void CudaSequenceOverlap::compute_after(int i) {
  if (split()) CUDA_CHECK(cudaStreamWaitEvent(compute_, events_.at(size_t(i)), 0));
}

}  // namespace hone

#endif  // HONE_CUDA
