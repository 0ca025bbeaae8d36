// The ggml tensor types of GGUF files: block sizes and the dequantization of the block formats to fp32.
// Plain header (no host-library includes) so that .cu code may include it.
//
// dequantize gives bitwise the values of the gguf Python package (gguf.quants.dequantize), the reference
// tools/gguf_golden.py records for tests/data/gguf/: every product and sum is one float32 operation in the
// package's order (d * scale is rounded before it multiplies q). Compile without contracting a*b+c into an FMA
// (GCC's default in ISO C++ mode; nvcc would need --fmad=false) or the last bit may differ.
#pragma once

#include <cstdint>

namespace hone::gguf {

// ggml's type numbers as they appear in a GGUF file.
enum GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22, kIQ4_XS = 23,
  kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39, kNVFP4 = 40, kQ1_0 = 41,
};

// The type's name ("Q4_1"), or null for a number ggml does not define.
const char* known_type_name(uint32_t type);

// Elements per block and bytes per block of every type ggml defines (also those hone cannot dequantize, so that
// their tensors' byte ranges can still be checked); 0 for an unknown number.
int64_t block_elements(uint32_t type);
int64_t block_bytes(uint32_t type);

// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool can_dequantize(uint32_t type);

// n elements (a multiple of block_elements(type)) from n / block_elements * block_bytes bytes at src (any
// alignment) to dst. The caller checks can_dequantize and the sizes.
void dequantize(uint32_t type, const void* src, float* dst, int64_t n);

}  // namespace hone::gguf
