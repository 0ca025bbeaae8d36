// Carver: bump allocation of aligned pieces from one block of memory, for the carve_* functions that lay out a
// layer's or a pass's regions (activations, scratch). With base == nullptr it only counts (used), so sizing a region
// and carving it share one code path: carve(nullptr) gives the bytes, carve(block) the pointers. The alignment is
// the backend's (B::kAlignment: 64 bytes on the CPU, 256 on the GPU). Plain header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hone {

struct Carver {
  char* base;        // the block, or nullptr to count only
  size_t alignment;  // a power of two
  size_t used = 0;

  // The next `bytes` bytes, their reservation rounded up to the alignment (nullptr when counting).
  char* take_bytes(size_t bytes) {
    char* r = base ? base + used : nullptr;
    used += (bytes + alignment - 1) / alignment * alignment;
    return r;
  }
  // The next n elements of E.
  template <typename E>
  E* take(int64_t n) {
    return reinterpret_cast<E*>(take_bytes(size_t(n) * sizeof(E)));
  }
};

}  // namespace hone
