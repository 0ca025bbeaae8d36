// Element types and devices of tensors, and the bf16/f16 <-> f32 conversions used on the host.
// Plain header: usable from .cu files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hone {

enum class DType : uint8_t { f32, bf16, f16, i32, i64 };
enum class Device : uint8_t { cpu, cuda };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

// bf16 is the top half of an f32; rounding to nearest even, NaN kept quiet.
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return uint16_t((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE half precision.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace hone
