// The GPU's finished training micro-batches, polled for the progress line (see gpu_pass_events.h).
#include "rl/gpu_pass_events.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone::rl {

GpuPassEvents::~GpuPassEvents() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void GpuPassEvents::start() { queued_ = finished_ = 0; }

void GpuPassEvents::recorded(int64_t i, cudaStream_t stream) {
  HONE_CHECK(i == queued_, "micro-batch ", i, " recorded after ", queued_);
  if (size_t(i) == events_.size()) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(events_[size_t(i)], stream));
  ++queued_;
}

int64_t GpuPassEvents::finished() {
  // The stream runs the micro-batches in order: the first unfinished one ends the count.
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

}  // namespace hone::rl

#endif  // HONE_CUDA
