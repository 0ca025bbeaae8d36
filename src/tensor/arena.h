// Arena: one reserved block of memory from which the tensors of a phase (activations of a forward/backward pass,
// scratch of an op) are bump-allocated, 64-byte aligned, and released all at once (reset) or back to a mark.
// It counts the bytes in use and the peak, so memory use is measured rather than guessed. Where the block comes
// from is pluggable (ArenaAllocator): host memory here, device memory from the CUDA side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace hone {

// Source of an arena's one block of memory.
class ArenaAllocator {
 public:
  virtual ~ArenaAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;  // 64-byte aligned, or throw
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual Device device() const = 0;
};

// Host memory (std::aligned_alloc).
std::shared_ptr<ArenaAllocator> host_arena_allocator();

class Arena {
 public:
  static constexpr size_t kAlignment = 64;
  using Mark = size_t;  // bytes in use at the time of mark()

  // Reserves capacity bytes (rounded up to kAlignment) now; name appears in error messages.
  Arena(std::string name, size_t capacity, std::shared_ptr<ArenaAllocator> allocator = host_arena_allocator());
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A view of fresh, uninitialized memory; `what` names the request in the out-of-capacity error.
  Tensor alloc(std::vector<int64_t> shape, DType dtype = DType::f32, const char* what = "tensor");
  void* alloc_bytes(size_t bytes, const char* what = "buffer");

  Mark mark() const { return used_; }
  // Frees everything allocated after the mark (tensors from then on must no longer be used).
  void release(Mark m);
  void reset() { release(0); }

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  size_t peak() const { return peak_; }
  void reset_peak() { peak_ = used_; }
  const std::string& name() const { return name_; }
  Device device() const { return allocator_->device(); }

 private:
  std::string name_;
  std::shared_ptr<ArenaAllocator> allocator_;
  char* base_ = nullptr;
  size_t capacity_ = 0, used_ = 0, peak_ = 0;
};

}  // namespace hone
