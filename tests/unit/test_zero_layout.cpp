// The ZeRO-1 layout arithmetic (padding, buckets, shard segments) and the rank -> GPU rule.
#include <boost/test/unit_test.hpp>

#include <vector>

#include "runtime/device_choice.h"
#include "runtime/error.h"
#include "train/zero_layout.h"

BOOST_AUTO_TEST_SUITE(zero_layout)

BOOST_AUTO_TEST_CASE(one_bucket_pads_to_a_multiple_of_dp_and_gives_contiguous_shards) {
  for (int rank = 0; rank < 4; ++rank) {
    const hone::ZeroLayout z(10, 4, rank);
    BOOST_TEST(z.padded_size() == 12);
    BOOST_TEST(z.shard_size() == 3);
    BOOST_REQUIRE(z.buckets().size() == 1u);
    BOOST_TEST(z.chunk_flat_offset(z.buckets()[0]) == 3 * rank);
  }
}

BOOST_AUTO_TEST_CASE(shard_segments_are_cut_at_the_shard_edges_and_skip_padding) {
  // flat: [0,4) decayed, [4,6) not, [6,10) decayed; dp 4 -> chunks of 3: [0,3) [3,6) [6,9) [9,12)
  const std::vector<hone::ParamSegment> segs{{0, 4, true}, {4, 2, false}, {6, 4, true}};
  const hone::ZeroLayout r1(10, 4, 1), r3(10, 4, 3);
  const auto s1 = r1.shard_segments(segs);
  BOOST_REQUIRE(s1.size() == 2u);
  BOOST_TEST(s1[0].flat_offset == 3);
  BOOST_TEST(s1[0].shard_offset == 0);
  BOOST_TEST(s1[0].size == 1);
  BOOST_TEST(s1[0].decay);
  BOOST_TEST(s1[1].flat_offset == 4);
  BOOST_TEST(s1[1].shard_offset == 1);
  BOOST_TEST(s1[1].size == 2);
  BOOST_TEST(!s1[1].decay);
  const auto s3 = r3.shard_segments(segs);  // [9,12): one real element, two of padding
  BOOST_REQUIRE(s3.size() == 1u);
  BOOST_TEST(s3[0].flat_offset == 9);
  BOOST_TEST(s3[0].size == 1);
}

BOOST_AUTO_TEST_CASE(buckets_run_from_the_end_and_chunks_concatenate_in_bucket_order) {
  // padded 20, dp 2, buckets start at 0, 8 and 14: [14,20) [8,14) [0,8)
  const hone::ZeroLayout z(19, 2, 1, {8, 14});
  BOOST_REQUIRE(z.buckets().size() == 3u);
  BOOST_TEST(z.buckets()[0].offset == 14);
  BOOST_TEST(z.buckets()[0].size == 6);
  BOOST_TEST(z.buckets()[1].offset == 8);
  BOOST_TEST(z.buckets()[2].offset == 0);
  BOOST_TEST(z.buckets()[2].size == 8);
  BOOST_TEST(z.buckets()[1].shard_offset == 3);
  BOOST_TEST(z.buckets()[2].shard_offset == 6);
  BOOST_TEST(z.chunk_flat_offset(z.buckets()[0]) == 17);
  // Every real element of the flat buffer belongs to exactly one rank's shard.
  std::vector<int> owner(19, 0);
  for (int rank = 0; rank < 2; ++rank)
    for (const auto& s : hone::ZeroLayout(19, 2, rank, {8, 14}).shard_segments({{0, 19, true}}))
      for (int64_t i = s.flat_offset; i < s.flat_offset + s.size; ++i) ++owner[size_t(i)];
  for (int o : owner) BOOST_TEST(o == 1);
  BOOST_CHECK_THROW(hone::ZeroLayout(19, 2, 0, {7}), hone::Error);  // not a multiple of dp
}

BOOST_AUTO_TEST_CASE(bucket_starts_round_up_to_final_elements_and_respect_the_size) {
  // Stages finish from 90, 61, 33 and 0 down; dp 4; padded 100.
  const std::vector<int64_t> ready{90, 61, 33, 0};
  BOOST_TEST(hone::zero_bucket_starts(ready, 100, 4, 1) == (std::vector<int64_t>{92, 64, 36}));
  BOOST_TEST(hone::zero_bucket_starts(ready, 100, 4, 30) == (std::vector<int64_t>{64}));
  BOOST_TEST(hone::zero_bucket_starts(ready, 100, 4, 1000).empty());
}

BOOST_AUTO_TEST_CASE(device_choice_follows_the_local_rank) {
  BOOST_TEST(hone::choose_device(1, 3, 4) == 0);  // one visible device per rank (binding)
  BOOST_TEST(hone::choose_device(8, 5, 8) == 5);
  BOOST_TEST(hone::choose_device(8, 1, 2) == 1);
  BOOST_CHECK_THROW(hone::choose_device(2, 2, 4), hone::UserError);
  BOOST_CHECK_THROW(hone::choose_device(0, 0, 1), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()
