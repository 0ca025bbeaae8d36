// The GPU's optimizer collectives (see optimizer_ops.h): NCCL on the Exec's stream, and the stream beside the compute.
#include "backend/optimizer_ops.h"

#if HONE_CUDA

#include "cuda/check.h"

namespace hone {

NcclWork all_reduce_sum_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv, int64_t n,
                              CommType t) {
  if (auto* nccl = dynamic_cast<NcclComm*>(&c)) return nccl->all_reduce_sum_async(send, recv, n, t, x.gpu->stream);
  c.all_reduce_sum_raw(send, recv, n, t);
  return {};
}

NcclWork reduce_scatter_sum_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv,
                                  int64_t recv_count, CommType t) {
  if (auto* nccl = dynamic_cast<NcclComm*>(&c))
    return nccl->reduce_scatter_sum_async(send, recv, recv_count, t, x.gpu->stream);
  c.reduce_scatter_sum_raw(send, recv, recv_count, t);
  return {};
}

NcclWork all_gather_async(const CudaBackend::Exec& x, Comm& c, const void* send, void* recv, int64_t send_count,
                          CommType t) {
  if (auto* nccl = dynamic_cast<NcclComm*>(&c))
    return nccl->all_gather_async(send, recv, send_count, t, x.gpu->stream);
  c.all_gather_raw(send, recv, send_count, t);
  return {};
}

void completes_here(const CudaBackend::Exec& x, NcclWork& w) {
  if (w.pending()) CUDA_CHECK(cudaEventRecord(w.event(), x.gpu->stream));
}

double sum_over(const CudaBackend::Exec& x, Comm& c, double v, double* scratch) {
  if (c.size() == 1) return v;
  if (!c.on_device()) {
    c.all_reduce_sum(&v, 1);
    return v;
  }
  const cudaStream_t s = x.gpu->stream;
  CUDA_CHECK(cudaMemcpyAsync(scratch, &v, sizeof(double), cudaMemcpyHostToDevice, s));
  all_reduce_sum_async(x, c, scratch, scratch, 1, CommType::f64).wait();
  CUDA_CHECK(cudaMemcpyAsync(&v, scratch, sizeof(double), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  return v;
}

CudaCollectiveQueue::CudaCollectiveQueue(const CudaBackend::Exec& compute)
    : compute_(compute.gpu->stream), ctx_(*compute.gpu), x_(&ctx_, nullptr) {
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&ctx_.stream, cudaStreamNonBlocking, greatest));
  CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&queue_done_, cudaEventDisableTiming));
}

CudaCollectiveQueue::~CudaCollectiveQueue() {
  if (compute_done_) cudaEventDestroy(compute_done_);
  if (queue_done_) cudaEventDestroy(queue_done_);
  if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
}

// A stream waits for the event's latest record at the time of the call: one event each way serves every bucket.
void CudaCollectiveQueue::after_compute() {
  CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, compute_done_, 0));
}

void CudaCollectiveQueue::compute_after() {
  CUDA_CHECK(cudaEventRecord(queue_done_, ctx_.stream));
  CUDA_CHECK(cudaStreamWaitEvent(compute_, queue_done_, 0));
}

}  // namespace hone

#endif  // HONE_CUDA
