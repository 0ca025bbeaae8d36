// Counter-based random numbers for sampling: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers:
// as easy as 1, 2, 3", SC'11), written from the published algorithm.
//
// Why counter-based: a draw is a pure function of (seed, step, sample, position, stream), so the token a sample
// gets never depends on batch composition, scheduling order or the number of ranks, and the CPU sampler and the
// CUDA sampler draw the same numbers. Plain header: host and device code both include it.
//
// Layout: key = the 64-bit seed (low word, high word); counter = (step, sample, position, stream), each 32 bits.
// `stream` separates independent uses of the same (step, sample, position), e.g. kStreamToken for the token draw.
#pragma once

#include <cstdint>

#ifndef HONE_HD
#ifdef __CUDACC__
#define HONE_HD __host__ __device__
#else
#define HONE_HD
#endif
#endif

namespace hone {

struct Philox4x32 {
  uint32_t v[4];
};

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // Weyl key increments (golden ratio, sqrt(3) - 1)
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// Streams in use (the fourth counter word).
inline constexpr uint32_t kStreamToken = 0;  // the uniform that picks the next token

HONE_HD inline void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * static_cast<uint64_t>(b);
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

HONE_HD inline Philox4x32 philox_round(const Philox4x32& c, uint32_t k0, uint32_t k1) {
  uint32_t hi0, lo0, hi1, lo1;
  philox_mulhilo(kPhiloxM0, c.v[0], hi0, lo0);
  philox_mulhilo(kPhiloxM1, c.v[2], hi1, lo1);
  Philox4x32 out;
  out.v[0] = hi1 ^ c.v[1] ^ k0;
  out.v[1] = lo1;
  out.v[2] = hi0 ^ c.v[3] ^ k1;
  out.v[3] = lo0;
  return out;
}

// Philox4x32 with 10 rounds: the key is bumped by the Weyl increments between rounds.
HONE_HD inline Philox4x32 philox4x32_10(Philox4x32 counter, uint32_t k0, uint32_t k1) {
  counter = philox_round(counter, k0, k1);
  for (int r = 1; r < 10; ++r) {
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
    counter = philox_round(counter, k0, k1);
  }
  return counter;
}

// Four raw 32-bit words for (seed, step, sample, position, stream).
HONE_HD inline Philox4x32 philox_bits(uint64_t seed, uint32_t step, uint32_t sample, uint32_t position,
                                      uint32_t stream = kStreamToken) {
  Philox4x32 c;
  c.v[0] = step;
  c.v[1] = sample;
  c.v[2] = position;
  c.v[3] = stream;
  return philox4x32_10(c, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The top 24 bits of a word as a float in [0, 1): every value is exact in fp32 and 1.0 is never returned.
HONE_HD inline float uniform_from_bits(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }

struct Uniform2 {
  float u[2];
};
struct Uniform4 {
  float u[4];
};

// One uniform in [0, 1): the first word of the block.
HONE_HD inline float philox_uniform(uint64_t seed, uint32_t step, uint32_t sample, uint32_t position,
                                    uint32_t stream = kStreamToken) {
  return uniform_from_bits(philox_bits(seed, step, sample, position, stream).v[0]);
}

// Two uniforms: the first two words (u[0] equals philox_uniform of the same arguments).
HONE_HD inline Uniform2 philox_uniform2(uint64_t seed, uint32_t step, uint32_t sample, uint32_t position,
                                        uint32_t stream = kStreamToken) {
  const Philox4x32 b = philox_bits(seed, step, sample, position, stream);
  Uniform2 r;
  r.u[0] = uniform_from_bits(b.v[0]);
  r.u[1] = uniform_from_bits(b.v[1]);
  return r;
}

// Four uniforms: all four words of the block.
HONE_HD inline Uniform4 philox_uniform4(uint64_t seed, uint32_t step, uint32_t sample, uint32_t position,
                                        uint32_t stream = kStreamToken) {
  const Philox4x32 b = philox_bits(seed, step, sample, position, stream);
  Uniform4 r;
  for (int i = 0; i < 4; ++i) r.u[i] = uniform_from_bits(b.v[i]);
  return r;
}

}  // namespace hone
