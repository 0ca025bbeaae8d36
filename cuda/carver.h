// cuda::Carver: the backend's Carver (src/backend/carver.h: bump allocation of aligned pieces from one block, which
// only counts when the block is null) at the device's 256-byte alignment, for the carve_* functions of cuda/ and
// of the GPU's own layouts. Plain header (no CUDA or host-library headers): usable from .cu files.
#pragma once

#include <cstddef>

#include "backend/carver.h"

namespace hone::cuda {

struct Carver : hone::Carver {
  static constexpr size_t kAlignment = 256;
  explicit Carver(char* block) : hone::Carver{block, kAlignment} {}
};

}  // namespace hone::cuda
