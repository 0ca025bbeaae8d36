// The context-parallel split of a packed batch and the moves of per-row values (see context_parallel.h).
#include "parallel/context_parallel.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {
namespace {

// Chunk length of a sequence of L >= 1 tokens split into 2C chunks (padded at its end).
int chunk_of(int L, int cp) { return (L + 2 * cp - 1) / (2 * cp); }

// Walks this rank's rows of batch in local order: emit(global row or -1, padded position index p within its
// sequence, sequence index or -1 for the trailing padding sequence, m) for each local row; new_seq(m) before each
// local sequence.
template <typename Row, typename Seq>
void walk_local_rows(const PackedBatch& batch, int cp, int rank, int multiple, Row&& emit, Seq&& new_seq) {
  HONE_CHECK(cp >= 1 && rank >= 0 && rank < cp && multiple >= 1, "bad context-parallel split: rank ", rank, " of ",
             cp, ", multiple ", multiple);
  int64_t local = 0;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int b = batch.seq_begin(s), L = batch.seq_end(s) - b;
    HONE_CHECK(L >= 1, "context parallelism: sequence ", s, " is empty");
    const int m = chunk_of(L, cp);
    new_seq(m);
    for (int c : {rank, 2 * cp - 1 - rank})
      for (int k = 0; k < m; ++k) {
        const int p = c * m + k;
        emit(p < L ? b + p : -1, p, s, m);
      }
    local += 2 * m;
  }
  if (local % multiple == 0) return;
  int m = 1;
  while ((local + 2 * m) % multiple != 0) ++m;
  new_seq(m);
  for (int c : {rank, 2 * cp - 1 - rank})
    for (int k = 0; k < m; ++k) emit(-1, c * m + k, -1, m);
}

}  // namespace

AttentionSegments ContextParallelSplit::earlier() const {
  AttentionSegments seg;
  seg.q_start = seq_start.data();
  seg.q_len = seq_len.data();
  seg.kv_start = seq_start.data();
  seg.kv_len = half_len.data();
  seg.count = int(seq_start.size());
  seg.max_q = 2 * max_chunk;
  seg.max_kv = max_chunk;
  return seg;
}

AttentionSegments ContextParallelSplit::later() const {
  AttentionSegments seg;
  seg.q_start = second_start.data();
  seg.q_len = half_len.data();
  seg.kv_start = seq_start.data();
  seg.kv_len = seq_len.data();
  seg.count = int(seq_start.size());
  seg.max_q = max_chunk;
  seg.max_kv = 2 * max_chunk;
  return seg;
}

ContextParallelSplit split_for_context_parallel(const PackedBatch& batch, int cp, int rank, int multiple) {
  ContextParallelSplit sp;
  sp.cp = cp;
  sp.rank = rank;
  sp.full_tokens = batch.num_tokens();
  PackedBatch& lb = sp.local;
  auto new_seq = [&](int m) {
    const int begin = lb.num_tokens();
    if (begin > 0) lb.cu_seqlens.push_back(begin);  // closes the previous local sequence
    sp.chunk.push_back(m);
    sp.seq_start.push_back(begin);
    sp.seq_len.push_back(2 * m);
    sp.half_len.push_back(m);
    sp.second_start.push_back(begin + m);
    sp.max_chunk = std::max(sp.max_chunk, m);
  };
  auto emit = [&](int row, int p, int s, int) {
    sp.global_row.push_back(row);
    if (row >= 0) {
      lb.tokens.push_back(batch.tokens[size_t(row)]);
      lb.positions.push_back(batch.positions[size_t(row)]);
      lb.targets.push_back(batch.targets[size_t(row)]);
      return;
    }
    // Padding: token 0, no target, positions continuing past the sequence's last token (or from 0 for the
    // padding sequence), so RoPE sees ordinary positions.
    int pos = p;
    if (s >= 0) {
      const int b = batch.seq_begin(s), L = batch.seq_end(s) - b;
      pos = batch.positions[size_t(b + L - 1)] + (p - L + 1);
    }
    lb.tokens.push_back(0);
    lb.positions.push_back(pos);
    lb.targets.push_back(-1);
  };
  walk_local_rows(batch, cp, rank, multiple, emit, new_seq);
  if (lb.num_tokens() > 0) lb.cu_seqlens.push_back(lb.num_tokens());
  return sp;
}

std::vector<int32_t> gathered_rows(const PackedBatch& batch, int cp, int multiple) {
  std::vector<int32_t> rows;
  for (int r = 0; r < cp; ++r)
    walk_local_rows(batch, cp, r, multiple, [&](int row, int, int, int) { rows.push_back(row); }, [](int) {});
  return rows;
}

namespace {

template <typename A>
void ensure(A& a, int64_t n, const char* what) {
  if (a.size() < n) a = A(n + n / 4, what);
}

}  // namespace

template <typename B>
const ContextParallelSplit& ContextParallelGroup<B>::split(const PackedBatch& batch, int multiple) {
  split_ = split_for_context_parallel(batch, size(), rank(), multiple);
  gathered_ = gathered_rows(batch, size(), multiple);
  const int64_t S = int64_t(split_.seq_start.size()), T = split_.local_tokens();
  if (segments_.size() < 4 * S) {
    segments_ = Array<int32_t>(4 * (S + S / 4 + 1), "context-parallel segments");
    segment_capacity_ = S + S / 4 + 1;
  }
  ensure(local_rows_, T, "context-parallel local rows");
  ensure(gathered_rows_, int64_t(gathered_.size()), "context-parallel gathered rows");
  ensure(all_, int64_t(gathered_.size()), "context-parallel gathered values");
  auto upload = [&](int32_t* dst, const std::vector<int32_t>& src) {
    if (!src.empty()) B::upload(exec_, dst, src.data(), src.size() * sizeof(int32_t));
  };
  int32_t* seg = segments_.get();
  upload(seg, split_.seq_start);
  upload(seg + segment_capacity_, split_.seq_len);
  upload(seg + 2 * segment_capacity_, split_.half_len);
  upload(seg + 3 * segment_capacity_, split_.second_start);
  upload(local_rows_.get(), split_.global_row);
  upload(gathered_rows_.get(), gathered_);
  return split_;
}

template <typename B>
AttentionSegments ContextParallelGroup<B>::earlier() const {
  AttentionSegments s = split_.earlier();
  const int32_t* seg = segments_.get();
  s.q_start = seg;
  s.q_len = seg + segment_capacity_;
  s.kv_start = seg;
  s.kv_len = seg + 2 * segment_capacity_;
  return s;
}

template <typename B>
AttentionSegments ContextParallelGroup<B>::later() const {
  AttentionSegments s = split_.later();
  const int32_t* seg = segments_.get();
  s.q_start = seg + 3 * segment_capacity_;
  s.q_len = seg + 2 * segment_capacity_;
  s.kv_start = seg;
  s.kv_len = seg + segment_capacity_;
  return s;
}

template <typename B>
void ContextParallelGroup<B>::gather_rows(const float* local, float* full) {
  const int64_t n = split_.local_tokens();
  cp_.all_gather(local, all_.get(), n);
  B::scatter_rows_f32(exec_, full, all_.get(), gathered_rows_.get(), int64_t(gathered_.size()));
}

template <typename B>
void ContextParallelGroup<B>::take_local_rows(const float* full, float* local) const {
  B::take_rows_f32(exec_, local, full, local_rows_.get(), split_.local_tokens());
}

#define HONE_INSTANTIATE_CONTEXT_PARALLEL(B) template class ContextParallelGroup<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_CONTEXT_PARALLEL)
#undef HONE_INSTANTIATE_CONTEXT_PARALLEL

}  // namespace hone
