// The GPU's finished passes, polled for the progress line (see pass_events.h).
#include "backend/pass_events.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {

PassEvents<CudaBackend>::~PassEvents() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void PassEvents<CudaBackend>::start() { queued_ = finished_ = 0; }

void PassEvents<CudaBackend>::recorded(int64_t i, const CudaBackend::Exec& x) {
  HONE_CHECK(i == queued_, "pass ", i, " recorded after ", queued_);
  if (size_t(i) == events_.size()) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(events_[size_t(i)], x.gpu->stream));
  ++queued_;
}

int64_t PassEvents<CudaBackend>::finished() {
  // The stream runs the passes in order: the first unfinished one ends the count.
  while (finished_ < queued_) {
    const cudaError_t r = cudaEventQuery(events_[size_t(finished_)]);
    if (r == cudaErrorNotReady) {
      // Not an error, but it may be left as the thread's last error, where the next CUDA_CHECK_LAST after a launch
      // would take it for one. Every launch before this point was checked, so nothing else is cleared.
      (void)cudaGetLastError();
      break;
    }
    CUDA_CHECK(r);
    ++finished_;
  }
  return finished_;
}

}  // namespace hone

#endif  // HONE_CUDA
