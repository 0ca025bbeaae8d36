// The paged KV cache's block allocator: allocation, growth, prefix sharing with copy-on-write of the partial
// block, reference counts and the free list.
#include <boost/test/unit_test.hpp>

#include "generation/kv_block_manager.h"
#include "runtime/error.h"

using hone::KvBlockManager;

BOOST_AUTO_TEST_SUITE(kv_block_manager)

BOOST_AUTO_TEST_CASE(allocate_grow_free) {
  KvBlockManager kv(8, 4);
  BOOST_TEST(kv.num_free() == 8);
  BOOST_TEST(kv.allocate(1, 9));  // 3 blocks
  BOOST_TEST(kv.block_table(1).size() == 3u);
  BOOST_TEST(kv.capacity(1) == 12);
  BOOST_TEST(kv.num_free() == 5);
  BOOST_TEST(kv.blocks_to_grow(1, 12) == 0);
  BOOST_TEST(kv.blocks_to_grow(1, 13) == 1);
  BOOST_TEST(kv.grow(1, 20));
  BOOST_TEST(kv.block_table(1).size() == 5u);
  BOOST_TEST(!kv.allocate(2, 13));  // 4 blocks, 3 free: refused, nothing taken
  BOOST_TEST(kv.num_free() == 3);
  BOOST_TEST(!kv.has_sequence(2));
  BOOST_TEST(!kv.grow(1, 40));
  BOOST_TEST(kv.block_table(1).size() == 5u);
  kv.check_consistency();
  BOOST_TEST(kv.peak_used() == 5);
  kv.free(1);
  BOOST_TEST(kv.num_free() == 8);
  kv.check_consistency();
  BOOST_CHECK_THROW(kv.free(1), hone::Error);
  BOOST_CHECK_THROW(kv.block_table(1), hone::Error);
}

BOOST_AUTO_TEST_CASE(fork_shares_full_blocks_and_copies_the_partial_one) {
  KvBlockManager kv(16, 4);
  BOOST_TEST(kv.allocate(0, 11));  // prompt of 10 tokens + room for one: blocks for 11 tokens = 3
  std::vector<std::pair<int32_t, int32_t>> copies;
  BOOST_TEST(kv.fork(0, 1, 10, 11, true, copies));
  BOOST_TEST(kv.fork(0, 2, 10, 11, true, copies));
  const auto& p = kv.block_table(0);
  const auto& a = kv.block_table(1);
  const auto& b = kv.block_table(2);
  BOOST_TEST(a.size() == 3u);
  BOOST_TEST(a[0] == p[0]);
  BOOST_TEST(a[1] == p[1]);
  BOOST_TEST(a[2] != p[2]);
  BOOST_TEST(b[2] != a[2]);
  BOOST_TEST(kv.ref_count(p[0]) == 3);
  BOOST_TEST(kv.ref_count(p[2]) == 1);
  BOOST_TEST(copies.size() == 2u);  // the partial block (tokens 8, 9) for each fork
  BOOST_TEST(copies[0].first == p[2]);
  BOOST_TEST(copies[0].second == a[2]);
  BOOST_TEST(copies[1].second == b[2]);
  BOOST_TEST(kv.common_prefix_blocks(1, 2) == 2);
  BOOST_TEST(kv.num_used() == 5);
  kv.check_consistency();
  kv.free(0);  // the shared blocks stay for the forks
  BOOST_TEST(kv.ref_count(a[0]) == 2);
  BOOST_TEST(kv.num_used() == 4);
  kv.free(1);
  kv.free(2);
  BOOST_TEST(kv.num_free() == 16);
  kv.check_consistency();
}

BOOST_AUTO_TEST_CASE(fork_at_a_block_boundary_copies_nothing) {
  KvBlockManager kv(16, 4);
  BOOST_TEST(kv.allocate(0, 9));  // prompt of 8 tokens: 2 full blocks, one more for the next token
  std::vector<std::pair<int32_t, int32_t>> copies;
  BOOST_TEST(kv.fork(0, 1, 8, 9, true, copies));
  BOOST_TEST(copies.empty());
  BOOST_TEST(kv.common_prefix_blocks(0, 1) == 2);
  BOOST_TEST(kv.block_table(1).size() == 3u);
  kv.check_consistency();
}

BOOST_AUTO_TEST_CASE(fork_without_sharing_copies_every_prompt_block) {
  KvBlockManager kv(16, 4);
  BOOST_TEST(kv.allocate(0, 11));
  std::vector<std::pair<int32_t, int32_t>> copies;
  BOOST_TEST(kv.fork(0, 1, 10, 11, false, copies));
  BOOST_TEST(copies.size() == 3u);
  BOOST_TEST(kv.common_prefix_blocks(0, 1) == 0);
  BOOST_TEST(kv.num_used() == 6);
  kv.check_consistency();
}

BOOST_AUTO_TEST_CASE(fork_refused_when_blocks_run_out) {
  KvBlockManager kv(4, 4);
  BOOST_TEST(kv.allocate(0, 11));  // 3 blocks
  std::vector<std::pair<int32_t, int32_t>> copies;
  BOOST_TEST(kv.fork(0, 1, 10, 11, true, copies));   // 1 private block
  BOOST_TEST(!kv.fork(0, 2, 10, 11, true, copies));  // none left
  BOOST_TEST(copies.size() == 1u);
  BOOST_TEST(!kv.has_sequence(2));
  BOOST_TEST(kv.ref_count(kv.block_table(0)[0]) == 2);
  kv.check_consistency();
}

BOOST_AUTO_TEST_SUITE_END()
