// Device memory whose address outlives its contents (CUDA virtual memory management): reserve() takes a range of
// device addresses once, map() backs it with fresh physical memory, unmap() gives that memory back to the device
// while the range stays reserved, and the next map() puts new memory at the SAME addresses. Whatever baked the
// addresses in (a CUDA graph's kernel arguments, a carved layout of pointers) stays valid across unmap/map; only
// the contents are lost. This is how the generator keeps its decode graphs from one GRPO step to the next while
// training has the memory in between (src/generation/gpu_generation_forward.h).
// The physical memory is not exportable (no shareable handle): no other process, and no NCCL buffer registration,
// can map it and keep it alive past unmap().
// Host header (g++ only; not for .cu files).
#pragma once

#include <cstddef>

namespace hone::cuda {

class VirtualDeviceBuffer {
 public:
  VirtualDeviceBuffer() = default;
  ~VirtualDeviceBuffer();  // unmaps and frees the range; never throws
  VirtualDeviceBuffer(VirtualDeviceBuffer&& o) noexcept;
  VirtualDeviceBuffer& operator=(VirtualDeviceBuffer&& o) noexcept;
  VirtualDeviceBuffer(const VirtualDeviceBuffer&) = delete;
  VirtualDeviceBuffer& operator=(const VirtualDeviceBuffer&) = delete;

  // Whether `device` supports virtual memory management (every GPU hone targets does; some virtualized ones don't).
  static bool supported(int device);
  // The size unit of `device`'s mappings (cuMemGetAllocationGranularity, recommended): sizes round up to it.
  static size_t granularity(int device);

  // Reserves a range of at least `bytes` (rounded up to the granularity) on the current device, freeing any range
  // held before (its address and contents are gone). Unmapped until map(). `what` names the buffer in errors.
  void reserve(size_t bytes, const char* what = "virtual device buffer");
  // Backs the whole range with fresh physical memory, readable and writable by the device; the contents are
  // undefined. Returns false, with nothing mapped, when the device has no room for it; throws on other failures.
  bool try_map();
  // As try_map(), but no room throws hone::Error naming the buffer, the request and the device's free memory.
  void map();
  // Gives the physical memory back; the range and data() stay. No work may still use the memory: synchronize the
  // streams that did first.
  void unmap();
  // unmap() and free the range.
  void release();

  bool reserved() const { return base_ != 0; }
  bool mapped() const { return mapped_; }
  void* data() const { return reinterpret_cast<void*>(base_); }
  size_t size() const { return bytes_; }  // of the range (a multiple of the granularity)

 private:
  unsigned long long base_ = 0;  // CUdeviceptr
  size_t bytes_ = 0;
  int device_ = -1;
  bool mapped_ = false;
  const char* what_ = "virtual device buffer";
};

}  // namespace hone::cuda
