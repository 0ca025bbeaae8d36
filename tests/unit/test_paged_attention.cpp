// Decode attention over a paged KV cache (cpu::paged_attention_decode_forward) against the contiguous-cache decode
// attention (cpu::attention_decode_forward) on the same K/V: random block tables (blocks in any order, rows sharing
// prefix blocks), odd lengths, lengths exactly at block boundaries, block sizes 1..16. Pool entries no row owns
// hold NaN, so reading one shows up. The two share their arithmetic, so the outputs are equal bit for bit.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/finite_diff.h"
#include "ops/ops.h"
#include "runtime/error.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(paged_attention_decode)

namespace {

struct Case {
  std::vector<int32_t> lens;
  int Hq, Hkv, D, block_size;
  int shared_prefix_blocks;  // rows 0 and 1 share this many leading blocks (0: none)
};

// Max |paged - contiguous| over every output; requires all outputs finite.
double max_paged_error(const Case& c, uint64_t seed) {
  const int B = int(c.lens.size()), Hq = c.Hq, Hkv = c.Hkv, D = c.D, bs = c.block_size;
  int max_len = 0, max_blocks = 0, total_blocks = 0;
  for (int32_t n : c.lens) {
    max_len = std::max(max_len, int(n));
    max_blocks = std::max(max_blocks, (n + bs - 1) / bs);
    total_blocks += (n + bs - 1) / bs;
  }
  max_blocks += 1;      // a spare entry per row, never read
  total_blocks += 3;    // unowned blocks, NaN
  std::mt19937_64 rng(seed);
  std::vector<int32_t> perm(test::len(total_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);

  // Row b's blocks; rows 0 and 1 share their first shared_prefix_blocks blocks.
  std::vector<int32_t> table(test::len(int64_t(B) * max_blocks), 0);
  int next = 0;
  for (int b = 0; b < B; ++b) {
    const int nb = (c.lens[test::len(b)] + bs - 1) / bs;
    for (int i = 0; i < nb; ++i) {
      const bool shared = b == 1 && i < c.shared_prefix_blocks;
      table[test::len(int64_t(b) * max_blocks + i)] = shared ? table[test::len(i)] : perm[test::len(next++)];
    }
  }
  const auto q = test::random_floats(test::len(int64_t(B) * Hq * D), seed + 1, -2.f, 2.f);
  const int64_t pool_n = int64_t(total_blocks) * Hkv * bs * D;
  std::vector<float> kp = test::nan_floats(test::len(pool_n)), vp = kp;
  // Contiguous cache: slot b holds row b's tokens; the pool gets the same values at the table's places.
  std::vector<float> kc = test::random_floats(test::len(int64_t(B) * max_len * Hkv * D), seed + 2, -2.f, 2.f);
  std::vector<float> vc = test::random_floats(kc.size(), seed + 3, -2.f, 2.f);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < c.lens[test::len(b)]; ++j)
      for (int g = 0; g < Hkv; ++g)
        for (int d = 0; d < D; ++d) {
          const int64_t src = ((int64_t(b) * max_len + j) * Hkv + g) * D + d;
          const int64_t blk = table[test::len(int64_t(b) * max_blocks + j / bs)];
          const int64_t dst = ((blk * Hkv + g) * bs + j % bs) * D + d;
          if (b == 1 && j / bs < c.shared_prefix_blocks) {  // shared tokens: row 1 sees row 0's values
            const int64_t src0 = ((int64_t(0) * max_len + j) * Hkv + g) * D + d;
            kc[test::len(src)] = kc[test::len(src0)];
            vc[test::len(src)] = vc[test::len(src0)];
          }
          kp[test::len(dst)] = kc[test::len(src)];
          vp[test::len(dst)] = vc[test::len(src)];
        }
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> paged = test::nan_floats(test::len(int64_t(B) * Hq * D)), flat = paged;
  cpu::paged_attention_decode_forward(paged.data(), q.data(), kp.data(), vp.data(), table.data(), c.lens.data(), B,
                                      max_blocks, bs, Hq, Hkv, D, scale);
  cpu::attention_decode_forward(flat.data(), q.data(), kc.data(), vc.data(), nullptr, c.lens.data(), B, max_len, Hq,
                                Hkv, D, scale);
  BOOST_REQUIRE(test::all_finite(paged.data(), paged.size()));
  BOOST_REQUIRE(test::all_finite(flat.data(), flat.size()));
  double worst = 0;
  for (size_t i = 0; i < paged.size(); ++i) worst = std::max(worst, double(std::fabs(paged[i] - flat[i])));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(equals_contiguous_decode_attention) {
  const std::vector<Case> cases = {
      {{1}, 2, 2, 8, 16, 0},                          // one token
      {{16, 32, 17, 15, 1, 33}, 4, 2, 8, 16, 0},      // exactly at block boundaries and one past / short of them
      {{37, 40, 5, 64}, 8, 2, 16, 8, 4},              // GQA 4, rows 0 and 1 share 4 blocks (32 tokens)
      {{7, 9, 3}, 2, 1, 4, 1, 0},                     // block size 1
      {{130, 129, 128, 3}, 4, 4, 8, 16, 8},           // GQA 1, shared prefix of 128 tokens, a row at the prefix end
  };
  uint64_t seed = 7;
  for (const Case& c : cases) {
    BOOST_TEST_INFO("Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D << " block_size=" << c.block_size);
    BOOST_TEST(max_paged_error(c, seed += 10) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(refuses_bad_lengths_tables_and_heads) {
  std::vector<float> buf(256, 0.f), out(64);
  const std::vector<int32_t> table = {0, 1}, bad_table = {-1, 0};
  const std::vector<int32_t> zero = {0}, too_long = {9}, ok = {5};
  BOOST_CHECK_THROW(cpu::paged_attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), table.data(),
                                                        zero.data(), 1, 2, 4, 2, 1, 4, 1.f),
                    hone::Error);
  BOOST_CHECK_THROW(cpu::paged_attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), table.data(),
                                                        too_long.data(), 1, 2, 4, 2, 1, 4, 1.f),
                    hone::Error);
  BOOST_CHECK_THROW(cpu::paged_attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(),
                                                        bad_table.data(), ok.data(), 1, 2, 4, 2, 1, 4, 1.f),
                    hone::Error);
  BOOST_CHECK_THROW(cpu::paged_attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), table.data(),
                                                        ok.data(), 1, 2, 4, 3, 2, 4, 1.f),
                    hone::Error);
  BOOST_CHECK_NO_THROW(cpu::paged_attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(),
                                                           table.data(), ok.data(), 1, 2, 4, 2, 1, 4, 1.f));
}

BOOST_AUTO_TEST_SUITE_END()
