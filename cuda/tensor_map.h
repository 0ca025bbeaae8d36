// Tensor maps of Hopper's tensor loads (cp.async.bulk.tensor) for hone's own GEMM kernels: a row-major bf16 matrix
// read in boxes of 64 columns (128 bytes, the 128-byte swizzle that wgmma's shared-memory descriptors expect) by
// box_rows rows; rows past the end read as zeros. Host header (g++ only).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

// Whether base can be mapped: 16-byte aligned, cols a positive multiple of 64 (rows 16-byte aligned, whole boxes).
bool tensor_map_fits(const bf16* base, int64_t cols);

// The map of base[rows, cols] (row stride cols); throws hone::Error naming the driver's status if refused.
CUtensorMap tensor_map_bf16_2d(const bf16* base, int64_t rows, int64_t cols, int box_rows);

}  // namespace hone::cuda
