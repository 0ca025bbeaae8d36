// cudaMalloc with a useful failure, arena blocks with byte counters, and cudaMemGetInfo sampling
// (see cuda/device_memory.h).
#include "cuda/device_memory.h"

#include <cuda_runtime.h>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone::cuda {

void* device_malloc(size_t bytes, const char* what) {
  const size_t request = bytes == 0 ? 1 : bytes;
  void* p = nullptr;
  const cudaError_t s = cudaMalloc(&p, request);
  if (s != cudaSuccess) {
    cudaGetLastError();  // clear the error state, so the next CUDA_CHECK_LAST does not report this failure
    size_t free_b = 0, total_b = 0;
    const bool have_info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
    throw Error(cat("device allocation of ", request, " bytes (", what, ") failed: ", detail::cuda_status_text(s),
                    have_info ? cat("; ", free_b, " of ", total_b, " device bytes are free") : std::string()));
  }
  return p;
}

void device_free(void* p) {
  if (p) cudaFree(p);
}

void* DeviceArenaAllocator::allocate(size_t bytes) {
  const size_t request = bytes == 0 ? Arena::kAlignment : bytes;
  void* p = device_malloc(request, "arena");
  const size_t now = in_use_.fetch_add(request) + request;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void DeviceArenaAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  device_free(p);
  in_use_.fetch_sub(bytes == 0 ? Arena::kAlignment : bytes);
}

std::shared_ptr<DeviceArenaAllocator> device_arena_allocator() { return std::make_shared<DeviceArenaAllocator>(); }

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo info;
  CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

size_t DeviceMemoryPeak::sample() {
  const size_t used = device_memory_info().used_bytes();
  if (used > peak_) peak_ = used;
  return used;
}

}  // namespace hone::cuda
