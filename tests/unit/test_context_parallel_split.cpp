// The context-parallel split of a packed batch (parallel/context_parallel.h): chunks i and 2C-1-i of every sequence
// on rank i, true positions and the caller's targets, padding at the sequence's end (token 0, no target), every
// caller row on exactly one rank, the same local row count on every rank, the extra padding sequence for a multiple,
// and the ring blocks' segments.
#include <boost/test/unit_test.hpp>

#include "model/packed_batch.h"
#include "parallel/context_parallel.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(context_parallel_split)

namespace {

PackedBatch batch_of(const std::vector<int>& lengths) {
  PackedBatch b;
  int32_t id = 1;
  for (int n : lengths) {
    std::vector<int32_t> s;
    for (int i = 0; i < n; ++i) s.push_back(id++);
    b.append(s);
  }
  return b;
}

}  // namespace

// The example of the header: 11 tokens, C = 2, chunks of 3.
BOOST_AUTO_TEST_CASE(eleven_tokens_over_two_ranks) {
  const PackedBatch b = batch_of({11});
  const ContextParallelSplit r0 = split_for_context_parallel(b, 2, 0), r1 = split_for_context_parallel(b, 2, 1);
  BOOST_TEST(r0.global_row == (std::vector<int32_t>{0, 1, 2, 9, 10, -1}), boost::test_tools::per_element());
  BOOST_TEST(r1.global_row == (std::vector<int32_t>{3, 4, 5, 6, 7, 8}), boost::test_tools::per_element());
  BOOST_TEST(r0.local.positions == (std::vector<int32_t>{0, 1, 2, 9, 10, 11}), boost::test_tools::per_element());
  BOOST_TEST(r0.local.tokens == (std::vector<int32_t>{1, 2, 3, 10, 11, 0}), boost::test_tools::per_element());
  // Targets are the caller's: the next token of the whole sequence, -1 at its end and on padding.
  BOOST_TEST(r0.local.targets == (std::vector<int32_t>{2, 3, 4, 11, -1, -1}), boost::test_tools::per_element());
  BOOST_TEST(r1.local.targets == (std::vector<int32_t>{5, 6, 7, 8, 9, 10}), boost::test_tools::per_element());
  BOOST_TEST(r0.chunk == std::vector<int32_t>{3});
  BOOST_TEST(r0.local.cu_seqlens == (std::vector<int32_t>{0, 6}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(every_row_once_and_equal_shares) {
  const PackedBatch b = batch_of({7, 1, 12, 2, 5, 3});
  for (int C : {1, 2, 3, 4}) {
    std::vector<int> seen(size_t(b.num_tokens()), 0);
    int local = -1;
    for (int r = 0; r < C; ++r) {
      const ContextParallelSplit sp = split_for_context_parallel(b, C, r);
      if (local < 0) local = sp.local_tokens();
      BOOST_TEST(sp.local_tokens() == local);
      BOOST_TEST(sp.local.num_seqs() == b.num_seqs());
      BOOST_TEST(sp.local.cu_seqlens.back() == sp.local_tokens());
      for (size_t i = 0; i < sp.global_row.size(); ++i) {
        const int32_t g = sp.global_row[i];
        if (g < 0) {
          BOOST_TEST(sp.local.targets[i] == -1);
          continue;
        }
        ++seen[size_t(g)];
        BOOST_TEST(sp.local.positions[i] == b.positions[size_t(g)]);
        BOOST_TEST(sp.local.tokens[i] == b.tokens[size_t(g)]);
      }
      // Rows of each local sequence in increasing position: the causal diagonal block is the local causal mask.
      for (int s = 0; s < sp.local.num_seqs(); ++s)
        for (int t = sp.local.seq_begin(s) + 1; t < sp.local.seq_end(s); ++t)
          BOOST_TEST(sp.local.positions[size_t(t)] > sp.local.positions[size_t(t - 1)]);
    }
    for (int n : seen) BOOST_TEST(n == 1);
    const std::vector<int32_t> all = gathered_rows(b, C);
    BOOST_TEST(int(all.size()) == C * local);
  }
}

// A sequence shorter than 2C chunks: padded to 2C tokens, one per chunk.
BOOST_AUTO_TEST_CASE(short_sequences_are_padded) {
  const PackedBatch b = batch_of({1, 3});
  const ContextParallelSplit r0 = split_for_context_parallel(b, 2, 0), r1 = split_for_context_parallel(b, 2, 1);
  BOOST_TEST(r0.global_row == (std::vector<int32_t>{0, -1, 1, -1}), boost::test_tools::per_element());
  BOOST_TEST(r1.global_row == (std::vector<int32_t>{-1, -1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(r0.local.cu_seqlens == (std::vector<int32_t>{0, 2, 4}), boost::test_tools::per_element());
}

// Under sequence parallelism the local rows must split over tp: one more padding sequence when they do not.
BOOST_AUTO_TEST_CASE(multiple_adds_a_padding_sequence) {
  const PackedBatch b = batch_of({5});  // m = 2: 4 local rows
  const ContextParallelSplit plain = split_for_context_parallel(b, 2, 1);
  BOOST_TEST(plain.local_tokens() == 4);
  const ContextParallelSplit three = split_for_context_parallel(b, 2, 1, 3);
  BOOST_TEST(three.local_tokens() == 6);
  BOOST_TEST(three.local.num_seqs() == 2);
  BOOST_TEST(three.chunk.back() == 1);
  BOOST_TEST(three.global_row[4] == -1);
  BOOST_TEST(three.global_row[5] == -1);
  BOOST_TEST(split_for_context_parallel(b, 2, 0, 4).local_tokens() == 4);
  BOOST_TEST(gathered_rows(b, 2, 3).size() == 12u);
}

BOOST_AUTO_TEST_CASE(ring_block_segments) {
  const PackedBatch b = batch_of({8, 4});  // C = 2: m = 2 and 1
  const ContextParallelSplit sp = split_for_context_parallel(b, 2, 1);
  const AttentionSegments e = sp.earlier(), l = sp.later();
  BOOST_TEST(e.count == 2);
  BOOST_TEST(e.q_start[1] == 4);
  BOOST_TEST(e.q_len[1] == 2);
  BOOST_TEST(e.kv_start[1] == 4);
  BOOST_TEST(e.kv_len[1] == 1);
  BOOST_TEST(e.max_q == 4);
  BOOST_TEST(e.max_kv == 2);
  BOOST_TEST(l.q_start[0] == 2);
  BOOST_TEST(l.q_len[0] == 2);
  BOOST_TEST(l.kv_len[0] == 4);
  BOOST_TEST(l.max_q == 2);
  BOOST_TEST(l.max_kv == 4);
}

BOOST_AUTO_TEST_SUITE_END()
