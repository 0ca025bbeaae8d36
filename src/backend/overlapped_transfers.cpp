// The GPU's transfers beside the compute: a stream of their own over NCCL (see overlapped_transfers.h).
#include "backend/overlapped_transfers.h"

#if HONE_CUDA

#include <vector>

#include "comm/nccl_comm.h"
#include "cuda/check.h"

namespace hone {

// The transfers of the current and the previous call, waited for on the host (the watchdog) one call later.
struct CudaOverlappedTransfers::Pending {
  std::vector<NcclWork> current, previous;
};

CudaOverlappedTransfers::CudaOverlappedTransfers(Comm& comm, const cuda::GpuContext& ctx)
    : comm_(comm), compute_(ctx.stream), nccl_(dynamic_cast<NcclComm*>(&comm)), pending_(std::make_unique<Pending>()) {
  if (nccl_) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&compute_done_, cudaEventDisableTiming));
  }
}

CudaOverlappedTransfers::~CudaOverlappedTransfers() {
  try {
    drain();
  } catch (...) {  // a failed transfer was reported by the watchdog; nothing more to do here
  }
  if (compute_done_) cudaEventDestroy(compute_done_);
  if (stream_) cudaStreamDestroy(stream_);
}

int CudaOverlappedTransfers::send_recv(const void* send, void* recv, int64_t n, int dest, int source, CommType type) {
  if (!nccl_) {  // in line: the Comm orders itself with the compute stream
    comm_.send_recv_raw(send, n, dest, recv, n, source, type);
    return -1;
  }
  CUDA_CHECK(cudaEventRecord(compute_done_, compute_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, compute_done_, 0));
  pending_->current.push_back(nccl_->send_recv_async(send, n, dest, recv, n, source, type, stream_));
  return int(pending_->current.size()) - 1;
}

void CudaOverlappedTransfers::arrived(int ticket) {
  if (ticket < 0) return;
  CUDA_CHECK(cudaStreamWaitEvent(compute_, pending_->current[size_t(ticket)].event(), 0));
}

void CudaOverlappedTransfers::next_call() {
  for (NcclWork& w : pending_->previous) w.wait();
  pending_->previous = std::move(pending_->current);
  pending_->current.clear();
}

void CudaOverlappedTransfers::drain() {
  for (auto* list : {&pending_->previous, &pending_->current}) {
    for (NcclWork& w : *list) w.wait();
    list->clear();
  }
}

void CudaOverlappedTransfers::synchronize() {
  if (nccl_) CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace hone

#endif  // HONE_CUDA
