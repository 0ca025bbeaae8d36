// How many of a training call's micro-batches the GPU has finished, for the progress line: the host queues a
// micro-batch's forward, loss and backward and goes on, so the count it has queued runs ahead of the device. An
// event recorded after each micro-batch's work is polled without waiting (cudaEventQuery), so the count shown is
// never more than what the device has done, and no synchronization is added to the step.
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace hone::rl {

class GpuPassEvents {
 public:
  GpuPassEvents() = default;
  ~GpuPassEvents();
  GpuPassEvents(const GpuPassEvents&) = delete;
  GpuPassEvents& operator=(const GpuPassEvents&) = delete;

  void start();                                 // a training call begins: no micro-batch recorded
  void recorded(int64_t i, cudaStream_t stream);  // micro-batch i's work is queued on the stream
  int64_t finished();                           // how many micro-batches, from the first, the device has finished

 private:
  std::vector<cudaEvent_t> events_;  // kept for the next calls
  int64_t queued_ = 0, finished_ = 0;
};

}  // namespace hone::rl

#endif  // HONE_CUDA
