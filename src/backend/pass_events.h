// How many of a call's passes (a training call's micro-batches) the backend has finished, for the progress line,
// per backend: PassEvents<B>.
//   CPU   a pass is done when its call returns: the count is what was recorded.
//   CUDA  the host queues a micro-batch's forward, loss and backward and goes on, so the count it has queued runs
//         ahead of the device. An event recorded after each micro-batch's work is polled without waiting
//         (cudaEventQuery), so the count shown is never more than what the device has done, and no synchronization
//         is added to the step.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

#if HONE_CUDA
#include <cuda_runtime.h>
#endif

namespace hone {

template <typename B>
class PassEvents;

template <>
class PassEvents<CpuBackend> {
 public:
  void start() { done_ = 0; }                                            // a call begins: nothing recorded
  void recorded(int64_t i, const CpuBackend::Exec&) { done_ = i + 1; }  // pass i's work is done
  int64_t finished() const { return done_; }                            // passes finished, from the first

 private:
  int64_t done_ = 0;
};

#if HONE_CUDA
template <>
class PassEvents<CudaBackend> {
 public:
  PassEvents() = default;
  ~PassEvents();
  PassEvents(const PassEvents&) = delete;
  PassEvents& operator=(const PassEvents&) = delete;
  void start();                                           // a call begins: nothing recorded
  void recorded(int64_t i, const CudaBackend::Exec& x);  // pass i's work is queued on x's stream
  int64_t finished();                                     // passes, from the first, the device has finished

 private:
  std::vector<cudaEvent_t> events_;  // kept for the next calls
  int64_t queued_ = 0, finished_ = 0;
};
#endif  // HONE_CUDA

}  // namespace hone
