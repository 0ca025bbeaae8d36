// Device memory: the one way hone takes it (device_malloc: cudaMalloc that names the request and the free memory
// when it fails), the one buffer type (DeviceArray, RAII), the allocator of hone's arenas (src/tensor/arena.h) and
// the measurements of device memory use:
//   * DeviceArray<T>: n elements of device memory, freed by its destructor (moves, never copies);
//   * DeviceArenaAllocator: each arena's one block from cudaMalloc on the current device; it counts the bytes it
//     holds now and at most (over all arenas it serves), so arena reservations are measured, not guessed;
//   * device_memory_info(): the driver's view (cudaMemGetInfo: free, total, used = total - free), which also sees
//     library workspaces, NCCL buffers and the CUDA context;
//   * DeviceMemoryPeak: the highest `used` seen over explicit samples (e.g. at phase boundaries).
// An arena's own used()/peak() says how much of its reservation a phase really touched.
// Host header (g++ only; not for .cu files).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/arena.h"

namespace hone::cuda {

// cudaMalloc of `bytes` (at least 1) on the current device; throws hone::Error naming `what`, the request and the
// device's free memory when it fails. device_free never throws (destructors call it).
void* device_malloc(size_t bytes, const char* what);
void device_free(void* p);

}  // namespace hone::cuda

namespace hone {

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(int64_t n, const char* what = "device buffer")
      : p_(static_cast<T*>(cuda::device_malloc(size_t(n > 0 ? n : 1) * sizeof(T), what))), n_(n) {}
  ~DeviceArray() { cuda::device_free(p_); }
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      cuda::device_free(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return size_t(n_) * sizeof(T); }

 private:
  T* p_ = nullptr;
  int64_t n_ = 0;
};

}  // namespace hone

namespace hone::cuda {

class DeviceArenaAllocator : public ArenaAllocator {
 public:
  // Allocates on the device current at each allocate() call (the caller's cudaSetDevice).
  void* allocate(size_t bytes) override;  // throws hone::Error naming the request and the free memory
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return Device::cuda; }

  size_t bytes_in_use() const { return in_use_.load(); }  // held by live arenas now
  size_t peak_bytes() const { return peak_.load(); }      // most held at once since creation or reset_peak()
  void reset_peak() { peak_.store(in_use_.load()); }

 private:
  std::atomic<size_t> in_use_{0}, peak_{0};
};

// A new allocator (its counters are its own: give all arenas of one device the same allocator to add them up).
std::shared_ptr<DeviceArenaAllocator> device_arena_allocator();

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  size_t used_bytes() const { return total_bytes - free_bytes; }
};

// cudaMemGetInfo of the current device (creates the CUDA context if there is none yet).
DeviceMemoryInfo device_memory_info();

// The peak of device memory in use, as sampled: call sample() where memory may be at its highest.
class DeviceMemoryPeak {
 public:
  size_t sample();  // returns the current used bytes and raises the peak if needed
  size_t peak_bytes() const { return peak_; }
  void reset() { peak_ = 0; }

 private:
  size_t peak_ = 0;
};

}  // namespace hone::cuda
