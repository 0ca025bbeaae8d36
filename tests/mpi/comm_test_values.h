// Test values carried by Comm in every element type: a double written as T (bf16 as its raw uint16_t bits) and read
// back. The values the MPI suites use are exact in every type.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace test {

template <typename T>
T make(double v) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return hone::f32_to_bf16(float(v));
  else
    return T(v);
}

template <typename T>
double read(T v) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return double(hone::bf16_to_f32(v));
  else
    return double(v);
}

}  // namespace test
