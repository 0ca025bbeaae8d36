// Deterministic random numbers for data: shuffles and synthetic tasks. A pure function of its keys (seed, epoch,
// index), identical on every platform and rank count (std distributions are implementation-defined, so not used).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace hone::data {

// splitmix64 finalizer: a bijective 64-bit mix.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A key from several values: mix_keys(seed, epoch) differs from mix_keys(epoch, seed).
inline uint64_t mix_keys(uint64_t a, uint64_t b) { return mix64(mix64(a) ^ (b + 0x632BE59BD9B4E019ull)); }
inline uint64_t mix_keys(uint64_t a, uint64_t b, uint64_t c) { return mix_keys(mix_keys(a, b), c); }

class DataRng {
 public:
  explicit DataRng(uint64_t key) : state_(key) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), unbiased (rejection); n > 0.
  uint64_t below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  // Uniform in [lo, hi] (inclusive).
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1)); }

 private:
  uint64_t state_;
};

// The permutation of [0, n) for a key (Fisher-Yates).
inline std::vector<int64_t> permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  DataRng rng(key);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(static_cast<uint64_t>(i) + 1)]);
  return p;
}

}  // namespace hone::data
