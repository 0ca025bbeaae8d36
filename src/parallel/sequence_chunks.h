// Sequence parallelism's token layout over a tensor-parallel group: which of a micro-batch's T tokens (rows) each
// rank holds in the residual stream, and the chunks its collectives move.
//
// Every rank holds T / tp rows (T a multiple of tp), cut into k chunks whose sizes differ by at most one row. Chunk
// j of every rank lies side by side in the token order: the ranks' rows of chunk j are the contiguous global rows
// [global_begin(j), global_begin(j) + global_rows(j)), rank r's at global_begin(j) + r * rows(j). So one all-gather
// of chunk j (each rank sends its rows(j) rows) fills a contiguous block of the gathered [T, C] rows, and one
// reduce-scatter of that block hands each rank its rows of chunk j: the GPU engine overlaps chunk j's collective
// with the GEMMs of the chunks already moved (parallel.tp_comm_overlap, backend/sequence_overlap.h). With one
// chunk this is Megatron's layout: rank r holds rows [r T/tp, (r+1) T/tp). Every engine running the same k holds the
// same rows, so the CPU engine proves the layout the GPU engine uses. Plain header: .cu-safe.
#pragma once

#include <algorithm>

namespace hone {

class SequenceChunks {
 public:
  // T: tokens, a multiple of tp. chunks: wanted; fewer when a rank holds fewer rows (at least one chunk).
  SequenceChunks(int T, int tp, int chunks)
      : tp_(tp), local_(T / tp), count_(std::max(1, std::min(chunks, local_))), base_(local_ / count_),
        extra_(local_ % count_) {}

  int count() const { return count_; }
  int tp() const { return tp_; }
  int local_rows() const { return local_; }
  // Chunk j of every rank's local rows: [local_begin(j), local_begin(j) + rows(j)).
  int local_begin(int j) const { return j * base_ + std::min(j, extra_); }
  int rows(int j) const { return base_ + (j < extra_ ? 1 : 0); }
  // Chunk j of every rank together, in the token order.
  int global_begin(int j) const { return tp_ * local_begin(j); }
  int global_rows(int j) const { return tp_ * rows(j); }
  // The token (global row) of `rank`'s local row `local`.
  int global_row(int rank, int local) const {
    const int long_rows = extra_ * (base_ + 1);  // the first extra_ chunks have one row more
    const int j = local < long_rows ? local / (base_ + 1) : extra_ + (local - long_rows) / std::max(base_, 1);
    return global_begin(j) + rank * rows(j) + (local - local_begin(j));
  }

 private:
  int tp_, local_, count_, base_, extra_;
};

}  // namespace hone
