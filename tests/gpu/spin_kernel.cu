// A kernel that blocks its stream until the host sets a flag in mapped pinned memory (or max_seconds pass, so a
// failing test never leaves the GPU spinning): lets the NCCL watchdog test make a collective wait forever.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/check.h"

namespace {
__global__ void spin_until_flag(const volatile int* flag, uint64_t max_ns) {
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (*flag == 0) {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > max_ns) break;
  }
}
}  // namespace

void launch_spin_until_flag(const int* device_flag, double max_seconds, cudaStream_t stream) {
  spin_until_flag<<<1, 1, 0, stream>>>(device_flag, uint64_t(max_seconds * 1e9));
  CUDA_CHECK_LAST();
}
