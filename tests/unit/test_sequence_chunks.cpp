// SequenceChunks: every token is held by exactly one rank; chunk j of all ranks is one contiguous block of tokens
// in rank order (what one all-gather or reduce-scatter of the chunk moves); one chunk is Megatron's contiguous
// layout; uneven chunks and more chunks than rows.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "parallel/sequence_chunks.h"

BOOST_AUTO_TEST_SUITE(sequence_chunks)

BOOST_AUTO_TEST_CASE(every_token_once_and_every_chunk_contiguous) {
  for (int tp : {1, 2, 3, 4, 8})
    for (int local : {0, 1, 5, 11, 64})
      for (int k : {1, 2, 3, 4, 7, 100}) {
        const int T = tp * local;
        const hone::SequenceChunks ch(T, tp, k);
        BOOST_TEST_CONTEXT("tp " << tp << ", T " << T << ", chunks " << k) {
          BOOST_TEST(ch.count() == std::max(1, std::min(k, local)));
          BOOST_TEST(ch.local_rows() == local);
          std::vector<int> held(size_t(T), 0);
          for (int r = 0; r < tp; ++r)
            for (int i = 0; i < local; ++i) ++held[size_t(ch.global_row(r, i))];
          BOOST_TEST(held == std::vector<int>(size_t(T), 1));
          int next = 0, rows = 0;
          for (int j = 0; j < ch.count(); ++j) {
            BOOST_TEST(ch.local_begin(j) == rows);
            BOOST_TEST(ch.global_begin(j) == next);
            BOOST_TEST(ch.global_rows(j) == tp * ch.rows(j));
            BOOST_TEST(std::abs(ch.rows(j) - ch.rows(0)) <= 1);
            for (int r = 0; r < tp; ++r)
              for (int u = 0; u < ch.rows(j); ++u)
                BOOST_TEST(ch.global_row(r, ch.local_begin(j) + u) == next + r * ch.rows(j) + u);
            next += ch.global_rows(j);
            rows += ch.rows(j);
          }
          BOOST_TEST(next == T);
          BOOST_TEST(rows == local);
        }
      }
}

BOOST_AUTO_TEST_CASE(one_chunk_is_the_contiguous_layout) {
  const hone::SequenceChunks ch(12, 3, 1);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 4; ++i) BOOST_TEST(ch.global_row(r, i) == 4 * r + i);
}

BOOST_AUTO_TEST_CASE(uneven_chunks_put_the_longer_ones_first) {
  const hone::SequenceChunks ch(22, 2, 3);  // 11 rows a rank: 4, 4, 3
  BOOST_TEST(ch.rows(0) == 4);
  BOOST_TEST(ch.rows(1) == 4);
  BOOST_TEST(ch.rows(2) == 3);
  BOOST_TEST(ch.global_row(1, 0) == 4);   // rank 1's first row follows rank 0's four
  BOOST_TEST(ch.global_row(0, 4) == 8);   // chunk 1 starts after both ranks' chunk 0
  BOOST_TEST(ch.global_row(1, 10) == 21);
}

BOOST_AUTO_TEST_SUITE_END()
