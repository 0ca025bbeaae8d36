// Decode attention against the packed causal attention: query row i of a packed sequence attending over the cached
// rows 0..i must give attention_forward's row i, for GQA ratios 1, 2, 4, odd lengths, slots in any order, and cache
// rows beyond a sequence's length (poisoned with NaN) never read.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "common/finite_diff.h"
#include "ops/ops.h"
#include "runtime/error.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(attention_decode)

namespace {

struct Case {
  std::vector<int32_t> lens;  // sequence lengths
  int Hq, Hkv, D;
};

// Max |decode - packed| over every row of every sequence; checks the outputs are all written and finite.
double max_decode_error(const Case& c, uint64_t seed) {
  const int S = int(c.lens.size()), Hq = c.Hq, Hkv = c.Hkv, D = c.D;
  std::vector<int32_t> cu = {0};
  for (int32_t n : c.lens) cu.push_back(cu.back() + n);
  const int T = cu.back();
  const auto q = test::random_floats(test::len(T * Hq * D), seed, -2.f, 2.f);
  const auto k = test::random_floats(test::len(T * Hkv * D), seed + 1, -2.f, 2.f);
  const auto v = test::random_floats(test::len(T * Hkv * D), seed + 2, -2.f, 2.f);
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> packed = test::nan_floats(test::len(T * Hq * D)), lse(test::len(Hq * T));
  cpu::attention_forward(packed.data(), lse.data(), q.data(), k.data(), v.data(), cu.data(), S, T, Hq, Hkv, D, scale);

  // Cache: S + 2 slots (two never used), sequence s in slot S + 1 - s (reversed), max_len one beyond the longest.
  int max_len = 0;
  for (int32_t n : c.lens) max_len = std::max(max_len, n + 1);
  const int slots_n = S + 2;
  std::vector<float> kc = test::nan_floats(test::len(int64_t(slots_n) * max_len * Hkv * D)), vc = kc;
  std::vector<int32_t> slot(test::len(S));
  for (int s = 0; s < S; ++s) {
    slot[test::len(s)] = S + 1 - s;
    for (int j = 0; j < c.lens[test::len(s)]; ++j)
      for (int x = 0; x < Hkv * D; ++x) {
        const int64_t dst = (int64_t(slot[test::len(s)]) * max_len + j) * Hkv * D + x;
        const int64_t src = int64_t(cu[test::len(s)] + j) * Hkv * D + x;
        kc[test::len(dst)] = k[test::len(src)];
        vc[test::len(dst)] = v[test::len(src)];
      }
  }
  // Decode every prefix: row i of every sequence at once (sequences shorter than i + 1 sit out).
  double worst = 0;
  for (int i = 0; i < max_len - 1; ++i) {
    std::vector<float> qb;
    std::vector<int32_t> sl, ln, rows;
    for (int s = 0; s < S; ++s) {
      if (i >= c.lens[test::len(s)]) continue;
      const int row = cu[test::len(s)] + i;
      qb.insert(qb.end(), q.begin() + int64_t(row) * Hq * D, q.begin() + int64_t(row + 1) * Hq * D);
      sl.push_back(slot[test::len(s)]);
      ln.push_back(i + 1);
      rows.push_back(row);
    }
    const int B = int(rows.size());
    std::vector<float> out = test::nan_floats(test::len(B * Hq * D));
    cpu::attention_decode_forward(out.data(), qb.data(), kc.data(), vc.data(), sl.data(), ln.data(), B, max_len, Hq,
                                  Hkv, D, scale);
    BOOST_REQUIRE(test::all_finite(out.data(), out.size()));
    for (int b = 0; b < B; ++b)
      for (int x = 0; x < Hq * D; ++x)
        worst = std::max(worst, double(std::fabs(out[test::len(b * Hq * D + x)] -
                                                 packed[test::len(int64_t(rows[test::len(b)]) * Hq * D + x)])));
  }
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_packed_attention_rows_for_gqa_1_2_4) {
  const std::vector<Case> cases = {
      {{1, 7, 3, 10}, 2, 2, 8},   // GQA 1
      {{5, 1, 9}, 4, 2, 6},       // GQA 2
      {{13, 2, 1, 7}, 8, 2, 4},   // GQA 4
      {{11}, 4, 1, 16},           // GQA 4, one sequence
  };
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const double err = max_decode_error(c, seed += 10);
    BOOST_TEST_INFO("Hq=" << c.Hq << " Hkv=" << c.Hkv << " D=" << c.D);
    BOOST_TEST(err <= 2e-6);
  }
}

BOOST_AUTO_TEST_CASE(null_slots_mean_slot_b_and_one_token_is_its_value) {
  // One cached token: softmax over one score is 1, so the output is exactly that token's value (per kv group).
  const int B = 3, Hq = 4, Hkv = 2, D = 4, max_len = 5;
  auto kc = test::random_floats(test::len(B * max_len * Hkv * D), 3), vc = test::random_floats(kc.size(), 4);
  const auto q = test::random_floats(test::len(B * Hq * D), 5);
  const std::vector<int32_t> lens(test::len(B), 1);
  std::vector<float> out = test::nan_floats(test::len(B * Hq * D));
  cpu::attention_decode_forward(out.data(), q.data(), kc.data(), vc.data(), nullptr, lens.data(), B, max_len, Hq, Hkv,
                                D, 0.5f);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h)
      for (int d = 0; d < D; ++d)
        BOOST_TEST(out[test::len((b * Hq + h) * D + d)] == vc[test::len((b * max_len * Hkv + h / 2) * D + d)]);
}

BOOST_AUTO_TEST_CASE(refuses_bad_lengths_and_heads) {
  std::vector<float> buf(64, 0.f), out(64);
  const std::vector<int32_t> zero = {0}, too_long = {5};
  BOOST_CHECK_THROW(cpu::attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), nullptr,
                                                  zero.data(), 1, 4, 2, 1, 4, 1.f),
                    hone::Error);
  BOOST_CHECK_THROW(cpu::attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), nullptr,
                                                  too_long.data(), 1, 4, 2, 1, 4, 1.f),
                    hone::Error);
  const std::vector<int32_t> one = {1};
  BOOST_CHECK_THROW(cpu::attention_decode_forward(out.data(), buf.data(), buf.data(), buf.data(), nullptr,
                                                  one.data(), 1, 4, 3, 2, 4, 1.f),
                    hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
