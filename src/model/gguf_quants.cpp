// Dequantization of ggml's block formats, element for element the float32 arithmetic of gguf/quants.py (the
// layouts of the blocks are ggml's: ggml-common.h).
#include "model/gguf_quants.h"

#include <cstring>

#include "runtime/error.h"

namespace hone::gguf {

namespace {

struct TypeTraits {
  uint32_t type;
  const char* name;
  int64_t block_elements;
  int64_t block_bytes;
  bool dequantizable;
};

constexpr int64_t kQK = 256;  // elements of a K-quant super-block

constexpr TypeTraits kTypes[] = {
    {kF32, "F32", 1, 4, true},
    {kF16, "F16", 1, 2, true},
    {kQ4_0, "Q4_0", 32, 2 + 16, true},
    {kQ4_1, "Q4_1", 32, 2 + 2 + 16, true},
    {kQ5_0, "Q5_0", 32, 2 + 4 + 16, true},
    {kQ5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true},
    {kQ8_0, "Q8_0", 32, 2 + 32, true},
    {kQ8_1, "Q8_1", 32, 4 + 4 + 32, false},
    {kQ2_K, "Q2_K", kQK, 2 + 2 + kQK / 16 + kQK / 4, true},
    {kQ3_K, "Q3_K", kQK, 2 + kQK / 4 + kQK / 8 + 12, true},
    {kQ4_K, "Q4_K", kQK, 2 + 2 + kQK / 2 + 12, true},
    {kQ5_K, "Q5_K", kQK, 2 + 2 + kQK / 2 + kQK / 8 + 12, true},
    {kQ6_K, "Q6_K", kQK, 2 + kQK / 2 + kQK / 4 + kQK / 16, true},
    {kQ8_K, "Q8_K", kQK, 4 + kQK + kQK / 8, true},
    {kIQ2_XXS, "IQ2_XXS", kQK, 2 + kQK / 4, false},
    {kIQ2_XS, "IQ2_XS", kQK, 2 + kQK / 4 + kQK / 32, false},
    {kIQ3_XXS, "IQ3_XXS", kQK, 2 + kQK / 4 + kQK / 8, false},
    {kIQ1_S, "IQ1_S", kQK, 2 + kQK / 8 + kQK / 16, false},
    {kIQ4_NL, "IQ4_NL", 32, 2 + 16, false},
    {kIQ3_S, "IQ3_S", kQK, 2 + kQK / 4 + kQK / 8 + kQK / 32 + 4, false},
    {kIQ2_S, "IQ2_S", kQK, 2 + kQK / 4 + kQK / 16, false},
    {kIQ4_XS, "IQ4_XS", kQK, 2 + 2 + kQK / 2 + kQK / 64, false},
    {kI8, "I8", 1, 1, false},
    {kI16, "I16", 1, 2, false},
    {kI32, "I32", 1, 4, false},
    {kI64, "I64", 1, 8, false},
    {kF64, "F64", 1, 8, false},
    {kIQ1_M, "IQ1_M", kQK, kQK / 8 + kQK / 16 + kQK / 32, false},
    {kBF16, "BF16", 1, 2, true},
    {kTQ1_0, "TQ1_0", kQK, 2 + 4 * 13, false},
    {kTQ2_0, "TQ2_0", kQK, 2 + 64, false},
    {kMXFP4, "MXFP4", 32, 1 + 16, false},
    {kNVFP4, "NVFP4", 64, 4 + 32, false},
    {kQ1_0, "Q1_0", 128, 2 + 16, false},
};

const TypeTraits* traits(uint32_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return &t;
  return nullptr;
}

// Loads through memcpy: tensor data in a GGUF file is only as aligned as general.alignment says (it may be 1).
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float bits_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// IEEE half to float, exact (every half is a float); NaN payloads are kept, as numpy's conversion keeps them.
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_float(sign);
    uint32_t e = 113;  // a subnormal half: shift the mantissa up to a normal float's
    while (!(mant & 0x400)) {
      mant <<= 1;
      --e;
    }
    return bits_float(sign | (e << 23) | ((mant & 0x3ff) << 13));
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}
inline float load_half(const uint8_t* p) { return half_to_float(load_u16(p)); }

// The 4-bit values of the 32-element blocks: the low nibbles of the 16 bytes are elements 0..15, the high 16..31.
inline uint8_t nibble32(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4); }

void dq_q4_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * float(int(nibble32(b + 2, j)) - 8);
}

void dq_q4_1(const uint8_t* b, float* y) {
  const float d = load_half(b), m = load_half(b + 2);
  for (int j = 0; j < 32; ++j) {
    const float dq = d * float(nibble32(b + 4, j));
    y[j] = dq + m;
  }
}

void dq_q5_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  const uint32_t qh = load_u32(b + 2);
  for (int j = 0; j < 32; ++j) {
    const int q = nibble32(b + 6, j) | (((qh >> j) & 1) << 4);
    y[j] = d * float(q - 16);
  }
}

void dq_q5_1(const uint8_t* b, float* y) {
  const float d = load_half(b), m = load_half(b + 2);
  const uint32_t qh = load_u32(b + 4);
  for (int j = 0; j < 32; ++j) {
    const int q = nibble32(b + 8, j) | (((qh >> j) & 1) << 4);
    const float dq = d * float(q);
    y[j] = dq + m;
  }
}

void dq_q8_0(const uint8_t* b, float* y) {
  const float d = load_half(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

// Q2_K: scales[16] (low nibble: scale, high: min), qs[64] (2 bits), d, dmin. Element e is in group e / 16 and
// its bits are (qs[(e / 128) * 32 + e % 32] >> 2 * ((e % 128) / 32)) & 3.
void dq_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = load_half(b + 80), dmin = load_half(b + 82);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * float(scales[g] & 0xf);
    const float ml = dmin * float(scales[g] >> 4);
    for (int i = 0; i < 16; ++i) {
      const int e = g * 16 + i;
      const int q = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const float dq = dl * float(q);
      y[e] = dq - ml;
    }
  }
}

// Q3_K: hmask[32], qs[64] (low 2 bits), scales[12] (16 six-bit scales, offset 32), d. The high bit subtracts 4
// when it is clear.
void dq_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = load_half(b + 108);
  for (int g = 0; g < 16; ++g) {
    const int lo = (sc[g % 8] >> (4 * (g / 8))) & 0x0f;
    const int hi = (sc[8 + g % 4] >> (2 * (g / 4))) & 0x03;
    const float dl = d * float((lo | (hi << 4)) - 32);
    for (int i = 0; i < 16; ++i) {
      const int e = g * 16 + i;
      const int ql = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int h = (hmask[e % 32] >> (e / 32)) & 1;
      y[e] = dl * float(ql - ((h ^ 1) << 2));
    }
  }
}

// The eight 6-bit scales and mins of Q4_K and Q5_K, packed in 12 bytes.
void scale_min_k4(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 0x3f;
    *mn = s[j + 4] & 0x3f;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 2) & 0x30);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; element e is in group e / 32, its nibble is
// (qs[(e / 64) * 32 + e % 32] >> 4 * ((e % 64) / 32)) & 15. Q5_K: the same with qh[32] before qs, bit g of qh[i]
// the fifth bit of element g * 32 + i.
template <bool kFifthBit>
void dq_q4_q5_k(const uint8_t* b, float* y) {
  const float d = load_half(b), dmin = load_half(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (kFifthBit ? 48 : 16);
  for (int g = 0; g < 8; ++g) {
    int sc, mn;
    scale_min_k4(b + 4, g, &sc, &mn);
    const float dl = d * float(sc), ml = dmin * float(mn);
    for (int i = 0; i < 32; ++i) {
      const int e = g * 32 + i;
      int q = (qs[(e / 64) * 32 + i] >> (4 * (g % 2))) & 0x0f;
      if (kFifthBit) q |= ((qh[i] >> g) & 1) << 4;
      const float dq = dl * float(q);
      y[e] = dq - ml;
    }
  }
}

// Q6_K: ql[128] (low nibbles), qh[64] (high 2 bits), scales[16] (int8), d.
void dq_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* sc = b + 192;
  const float d = load_half(b + 208);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * float(int8_t(sc[g]));
    for (int i = 0; i < 16; ++i) {
      const int e = g * 16 + i;
      const int half = e / 128, r = e % 128;
      const int lo = (ql[half * 64 + r % 64] >> (4 * (r / 64))) & 0x0f;
      const int hi = (qh[half * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
      y[e] = dl * float((lo | (hi << 4)) - 32);
    }
  }
}

// Q8_K: d (float32), qs[256] (int8), bsums[16] (unused here).
void dq_q8_k(const uint8_t* b, float* y) {
  const float d = bits_float(load_u32(b));
  for (int j = 0; j < 256; ++j) y[j] = d * float(int8_t(b[4 + j]));
}

}  // namespace

const char* known_type_name(uint32_t type) {
  const TypeTraits* t = traits(type);
  return t ? t->name : nullptr;
}

int64_t block_elements(uint32_t type) {
  const TypeTraits* t = traits(type);
  return t ? t->block_elements : 0;
}

int64_t block_bytes(uint32_t type) {
  const TypeTraits* t = traits(type);
  return t ? t->block_bytes : 0;
}

bool can_dequantize(uint32_t type) {
  const TypeTraits* t = traits(type);
  return t && t->dequantizable;
}

void dequantize(uint32_t type, const void* src, float* dst, int64_t n) {
  const TypeTraits* t = traits(type);
  HONE_CHECK(t && t->dequantizable, "dequantize: type ", type);
  HONE_CHECK(n >= 0 && n % t->block_elements == 0, "dequantize: ", n, " elements of ", t->name);
  const auto* s = static_cast<const uint8_t*>(src);
  switch (type) {
    case kF32:
      std::memcpy(dst, s, size_t(n) * 4);
      return;
    case kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = load_half(s + 2 * i);
      return;
    case kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bits_float(uint32_t(load_u16(s + 2 * i)) << 16);
      return;
    default: break;
  }
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case kQ4_0: block = dq_q4_0; break;
    case kQ4_1: block = dq_q4_1; break;
    case kQ5_0: block = dq_q5_0; break;
    case kQ5_1: block = dq_q5_1; break;
    case kQ8_0: block = dq_q8_0; break;
    case kQ2_K: block = dq_q2_k; break;
    case kQ3_K: block = dq_q3_k; break;
    case kQ4_K: block = dq_q4_q5_k<false>; break;
    case kQ5_K: block = dq_q4_q5_k<true>; break;
    case kQ6_K: block = dq_q6_k; break;
    case kQ8_K: block = dq_q8_k; break;
    default: HONE_CHECK(false, "dequantize: no block function for ", t->name);
  }
  const int64_t blocks = n / t->block_elements;
  for (int64_t i = 0; i < blocks; ++i) block(s + i * t->block_bytes, dst + i * t->block_elements);
}

}  // namespace hone::gguf
