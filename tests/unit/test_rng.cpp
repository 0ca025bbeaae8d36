// Philox4x32-10: the published known-answer vectors, uniformity, and independence of seeds, counters and streams.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/philox.h"

namespace {

hone::Philox4x32 ctr(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return hone::Philox4x32{{a, b, c, d}}; }

void check_block(const hone::Philox4x32& got, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  BOOST_TEST(got.v[0] == a);
  BOOST_TEST(got.v[1] == b);
  BOOST_TEST(got.v[2] == c);
  BOOST_TEST(got.v[3] == d);
}

// Pearson chi-square of counts against a uniform expectation.
double chi_square(const std::vector<int>& counts, double expected) {
  double chi2 = 0;
  for (int c : counts) chi2 += (c - expected) * (c - expected) / expected;
  return chi2;
}

double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= n, my /= n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rng)

BOOST_AUTO_TEST_CASE(known_answer_zero) {
  check_block(hone::philox4x32_10(ctr(0, 0, 0, 0), 0, 0), 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u);
}

BOOST_AUTO_TEST_CASE(known_answer_all_ones) {
  check_block(hone::philox4x32_10(ctr(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu), 0xffffffffu, 0xffffffffu),
              0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu);
}

BOOST_AUTO_TEST_CASE(known_answer_pi_digits) {
  check_block(hone::philox4x32_10(ctr(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u), 0xa4093822u, 0x299f31d0u),
              0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u);
}

BOOST_AUTO_TEST_CASE(counter_layout_is_step_sample_position_stream_and_key_is_seed) {
  const uint64_t seed = 0x299f31d0a4093822ull;
  const hone::Philox4x32 b = hone::philox_bits(seed, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u);
  check_block(b, 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u);
  // The uniform is the top 24 bits of the first word.
  BOOST_TEST(hone::philox_uniform(seed, 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u) ==
             static_cast<float>(0xd16cfe09u >> 8) / 16777216.0f);
}

BOOST_AUTO_TEST_CASE(uniform_range_and_pair_quad_consistency) {
  BOOST_TEST(hone::uniform_from_bits(0) == 0.0f);
  BOOST_TEST(hone::uniform_from_bits(0xffffffffu) < 1.0f);
  BOOST_TEST(hone::uniform_from_bits(0xffffffffu) == 1.0f - 1.0f / 16777216.0f);
  for (uint32_t p = 0; p < 50; ++p) {
    const float u = hone::philox_uniform(7, 3, 11, p);
    const hone::Uniform2 u2 = hone::philox_uniform2(7, 3, 11, p);
    const hone::Uniform4 u4 = hone::philox_uniform4(7, 3, 11, p);
    BOOST_TEST(u >= 0.0f);
    BOOST_TEST(u < 1.0f);
    BOOST_TEST(u2.u[0] == u);
    BOOST_TEST(u4.u[0] == u);
    BOOST_TEST(u4.u[1] == u2.u[1]);
  }
}

// 200,000 draws over positions into 100 bins: chi-square with 99 degrees of freedom stays below the 0.1% critical
// value 148.2 for each of the four output words.
BOOST_AUTO_TEST_CASE(uniform_histogram_chi_square) {
  const int bins = 100, n = 200000;
  for (int word = 0; word < 4; ++word) {
    std::vector<int> counts(bins, 0);
    for (int i = 0; i < n; ++i) {
      const hone::Uniform4 u = hone::philox_uniform4(12345, 1, static_cast<uint32_t>(i / 1000), i % 1000);
      counts[static_cast<int>(u.u[word] * bins)]++;
    }
    const double chi2 = chi_square(counts, static_cast<double>(n) / bins);
    BOOST_TEST_MESSAGE("word " << word << " chi2 " << chi2);
    BOOST_TEST(chi2 < 148.2);
    BOOST_TEST(chi2 > 60.0);  // too-perfect flatness would mean the draws are not random either (0.1% lower tail)
  }
}

// Pairs of successive words on a 20x20 grid: chi-square with 399 degrees of freedom below its 0.1% critical value 489.
BOOST_AUTO_TEST_CASE(pairs_are_jointly_uniform) {
  const int g = 20, n = 200000;
  std::vector<int> counts(g * g, 0);
  for (int i = 0; i < n; ++i) {
    const hone::Uniform2 u = hone::philox_uniform2(99, 0, 0, static_cast<uint32_t>(i));
    counts[static_cast<int>(u.u[0] * g) * g + static_cast<int>(u.u[1] * g)]++;
  }
  const double chi2 = chi_square(counts, static_cast<double>(n) / (g * g));
  BOOST_TEST_MESSAGE("pair chi2 " << chi2);
  BOOST_TEST(chi2 < 489.0);
}

// Neighbouring seeds, steps, samples and streams give uncorrelated sequences: |r| < 4/sqrt(n).
BOOST_AUTO_TEST_CASE(neighbouring_keys_and_counters_are_independent) {
  const int n = 50000;
  std::vector<double> base(n), seed1(n), seed_hi(n), step1(n), sample1(n), stream1(n);
  for (int i = 0; i < n; ++i) {
    const uint32_t p = static_cast<uint32_t>(i);
    base[i] = hone::philox_uniform(1000, 5, 2, p);
    seed1[i] = hone::philox_uniform(1001, 5, 2, p);
    seed_hi[i] = hone::philox_uniform(1000 + (1ull << 32), 5, 2, p);
    step1[i] = hone::philox_uniform(1000, 6, 2, p);
    sample1[i] = hone::philox_uniform(1000, 5, 3, p);
    stream1[i] = hone::philox_uniform(1000, 5, 2, p, 1);
  }
  const double bound = 4.0 / std::sqrt(static_cast<double>(n));
  for (const auto* other : {&seed1, &seed_hi, &step1, &sample1, &stream1}) {
    const double r = correlation(base, *other);
    BOOST_TEST(std::fabs(r) < bound, "correlation " << r);
  }
  // Successive positions of one sequence are uncorrelated too (lag-1).
  std::vector<double> lag0(base.begin(), base.end() - 1), lag1(base.begin() + 1, base.end());
  BOOST_TEST(std::fabs(correlation(lag0, lag1)) < bound);
}

// Flipping one bit of the seed flips about half of the 128 output bits (avalanche).
BOOST_AUTO_TEST_CASE(one_seed_bit_changes_half_the_output_bits) {
  long flipped = 0, total = 0;
  for (int bit = 0; bit < 64; ++bit) {
    for (uint32_t p = 0; p < 16; ++p) {
      const hone::Philox4x32 a = hone::philox_bits(0x0123456789abcdefull, 1, 2, p);
      const hone::Philox4x32 b = hone::philox_bits(0x0123456789abcdefull ^ (1ull << bit), 1, 2, p);
      for (int w = 0; w < 4; ++w) flipped += __builtin_popcount(a.v[w] ^ b.v[w]);
      total += 128;
    }
  }
  const double frac = static_cast<double>(flipped) / static_cast<double>(total);
  BOOST_TEST(frac > 0.48);
  BOOST_TEST(frac < 0.52);
}

BOOST_AUTO_TEST_SUITE_END()
