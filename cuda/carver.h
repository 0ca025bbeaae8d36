// Carver: bump allocation of 256-byte aligned pieces from one block of device memory, for the carve_* functions that
// lay out a layer's or a pass's regions (activations, scratch, buffers). With base == nullptr it only counts (used),
// so sizing a region and carving it share one code path: carve(nullptr) gives the bytes, carve(block) the pointers.
// Plain header (no CUDA or host-library headers): usable from .cu files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hone::cuda {

struct Carver {
  static constexpr size_t kAlignment = 256;

  char* base;  // the block, or nullptr to count only
  size_t used = 0;

  // The next `bytes` bytes, their reservation rounded up to kAlignment (nullptr when counting).
  char* take_bytes(size_t bytes) {
    char* r = base ? base + used : nullptr;
    used += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    return r;
  }

  // The next n elements of E.
  template <typename E>
  E* take(int64_t n) {
    return reinterpret_cast<E*>(take_bytes(size_t(n) * sizeof(E)));
  }
};

}  // namespace hone::cuda
