// A strided copy within one backend's memory: rows of `width` bytes, row i from src + i spitch to dst + i dpitch
// (pitches in bytes). The refit's strided blocks (parallel/reshard.h) are its users: a row-parallel weight's columns
// are a strided block. On the CPU a memcpy a row; on the GPU one cudaMemcpy2DAsync on the Exec's stream. Overloaded
// on the backend's Exec, so code over B calls copy_2d(x, ...) and dispatch is at compile time.
#pragma once

#include <cstddef>
#include <cstring>

#include "backend/backend.h"

namespace hone {

inline void copy_2d(const CpuBackend::Exec&, void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                    size_t rows) {
  for (size_t i = 0; i < rows; ++i)
    std::memcpy(static_cast<char*>(dst) + i * dpitch, static_cast<const char*>(src) + i * spitch, width);
}

#if HONE_CUDA
inline void copy_2d(const CudaBackend::Exec& x, void* dst, size_t dpitch, const void* src, size_t spitch,
                    size_t width, size_t rows) {
  CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, x.gpu->stream));
}
#endif

}  // namespace hone
