// The paged KV cache's CPU data movers and the stop check (src/ops/cpu/kv_cache.cpp), against the layout written
// out by hand: kv_append writes token t's head h at ((block * Hkv + h) * block_size + offset) * D and nothing else
// (every other pool value stays poisoned), v's rows may lie ldv apart, slots < 0 are skipped; kv_copy_blocks copies
// whole blocks in both pools; check_stops flags a stop id before the length rules.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/ops.h"

BOOST_AUTO_TEST_SUITE(kv_cache_ops)

BOOST_AUTO_TEST_CASE(append_writes_each_token_where_the_layout_says_and_nothing_else) {
  const int T = 3, Hkv = 2, D = 3, bs = 4, blocks = 3;
  const int64_t ldv = int64_t(Hkv) * D + 2;  // v inside a wider fused product
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> kp(size_t(blocks) * Hkv * bs * D, nan), vp(kp.size(), nan);
  std::vector<float> k(size_t(T) * Hkv * D), v(size_t(T) * size_t(ldv));
  for (size_t i = 0; i < k.size(); ++i) k[i] = float(i) + 0.5f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = -float(i) - 0.25f;
  const std::vector<int32_t> slots = {9, -1, 2};  // block 2 offset 1; skipped; block 0 offset 2
  hone::cpu::kv_append(kp.data(), vp.data(), k.data(), v.data(), slots.data(), T, Hkv, D, bs, ldv);
  int written = 0;
  for (int t : {0, 2}) {
    const int block = slots[size_t(t)] / bs, off = slots[size_t(t)] % bs;
    for (int h = 0; h < Hkv; ++h)
      for (int d = 0; d < D; ++d) {
        const size_t at = size_t(((block * Hkv + h) * bs + off) * D + d);
        BOOST_TEST(kp[at] == k[size_t((t * Hkv + h) * D + d)]);
        BOOST_TEST(vp[at] == v[size_t(t * ldv + h * D + d)]);
        ++written;
      }
  }
  int finite = 0;
  for (size_t i = 0; i < kp.size(); ++i) finite += std::isfinite(kp[i]) ? 1 : 0;
  BOOST_TEST(finite == written);  // the skipped token and every other slot untouched
}

BOOST_AUTO_TEST_CASE(copy_blocks_copies_whole_blocks_in_both_pools) {
  const int Hkv = 2, D = 2, bs = 2, blocks = 4, per_block = Hkv * bs * D;
  std::vector<float> kp(size_t(blocks * per_block)), vp(kp.size());
  for (size_t i = 0; i < kp.size(); ++i) kp[i] = float(i), vp[i] = 100.f + float(i);
  const std::vector<float> k0 = kp, v0 = vp;
  const std::vector<int32_t> src = {1, 3}, dst = {0, 2};
  hone::cpu::kv_copy_blocks(kp.data(), vp.data(), src.data(), dst.data(), 2, Hkv, D, bs);
  for (int b = 0; b < blocks; ++b) {
    const int from = b == 0 ? 1 : b == 2 ? 3 : b;
    for (int e = 0; e < per_block; ++e) {
      BOOST_TEST(kp[size_t(b * per_block + e)] == k0[size_t(from * per_block + e)]);
      BOOST_TEST(vp[size_t(b * per_block + e)] == v0[size_t(from * per_block + e)]);
    }
  }
}

BOOST_AUTO_TEST_CASE(stops_flag_stop_ids_before_the_length_rules) {
  // Rows: stop id; stop id at the length limit (stop wins); completion limit reached; one short of it; total limit
  // reached; one short of it; nothing; the other stop id.
  const std::vector<int32_t> tokens = {5, 9, 1, 1, 2, 2, 3, 9};
  const std::vector<int32_t> gen_len = {0, 9, 9, 8, 0, 0, 0, 4};
  const std::vector<int32_t> seq_len = {10, 30, 30, 30, 99, 98, 10, 10};
  const std::vector<int32_t> max_new = {10, 10, 10, 10, 50, 50, 50, 50};
  const std::vector<int32_t> stops = {5, 9};
  const int B = int(tokens.size()), max_total = 100;
  std::vector<int32_t> done(size_t(B), -7);
  hone::cpu::check_stops(done.data(), tokens.data(), gen_len.data(), seq_len.data(), max_new.data(), max_total,
                         stops.data(), 2, B);
  const std::vector<int32_t> want = {1, 1, 2, 0, 2, 0, 0, 1};
  BOOST_TEST(done == want, boost::test_tools::per_element());
  hone::cpu::check_stops(done.data(), tokens.data(), gen_len.data(), seq_len.data(), max_new.data(), max_total,
                         nullptr, 0, B);
  const std::vector<int32_t> want_no_stop = {0, 2, 2, 0, 2, 0, 0, 0};
  BOOST_TEST(done == want_no_stop, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
