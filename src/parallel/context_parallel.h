// Context parallelism (parallel.cp = C): how one packed batch is split over the C ranks of a context-parallel group
// for training and logprobs, as Megatron-Core splits it for causal load balance. Every sequence is padded to a
// multiple of 2C tokens (padding at its end: no real token attends to it; token 0, no target) and cut into 2C
// equal chunks of m tokens; rank i holds chunks i and 2C-1-i, so every rank gets the same share of the causal
// attention's work:
//
//   sequence of 11 tokens, C = 2: padded to 12, chunks of m = 3:  [0 1 2][3 4 5][6 7 8][9 10 pad]
//   rank 0: [0 1 2 | 9 10 pad]      rank 1: [3 4 5 | 6 7 8]
//
// Each rank's rows form a packed batch of its own (one local sequence of 2m rows per sequence, in the caller's
// order) with the tokens' true positions (RoPE) and the caller's targets, so everything but attention is token-local
// and runs on the rank's rows. Every rank holds the same number of rows (the sum of 2m over the sequences), so one
// all-gather brings every rank's per-row values back in the caller's row order. A sequence shorter than 2C tokens is
// padded to 2C (one token per chunk).
//
// Attention crosses the ranks: ring attention (parallel/ring_attention.h) passes the K/V blocks around the group.
// Against rank r's block this rank's queries see: r == rank (the diagonal block), causal attention on the local rows
// (row order is position order); r < rank, r's first chunk lies before both of this rank's chunks and its second
// chunk after both, so every local row sees r's first chunk whole and nothing of the second (earlier()); r > rank,
// both of r's chunks lie between this rank's two chunks, so only the second chunk's rows see them, whole (later()).
// Every off-diagonal block is a full (non-causal) attention of 2m x m or m x 2m rows per sequence, half the work
// of the diagonal's causal 2m x 2m: the same work on every rank at every ring step.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/packed_batch.h"
#include "ops/ops.h"

namespace hone {

// This rank's share of one packed batch (see the top of the file). Host arrays; row indices are local rows.
struct ContextParallelSplit {
  int cp = 1, rank = 0;
  int full_tokens = 0;              // T of the caller's batch
  PackedBatch local;                // this rank's rows: tokens, true positions, the caller's targets (-1 on padding)
  std::vector<int32_t> global_row;  // [local T]: the caller's row of each local row; -1 on padding rows
  std::vector<int32_t> chunk;       // [local sequences]: m, the chunk length (the local sequence has 2m rows)
  // The segments of the off-diagonal ring blocks (ops/ops.h), over the local sequences.
  std::vector<int32_t> seq_start, seq_len, half_len, second_start;
  int max_chunk = 0;

  int local_tokens() const { return local.num_tokens(); }
  // A block from rank r < rank: every local row against r's first chunk (the first m key rows of each sequence).
  AttentionSegments earlier() const;
  // A block from rank r > rank: the rows of this rank's second chunk against all 2m key rows of each sequence.
  AttentionSegments later() const;
};

// The split of batch for `rank` of `cp` ranks. multiple > 1: the local rows are made a multiple of it by one more
// local sequence of padding (sequence parallelism splits the local rows over tp). Pure: every rank can compute any
// rank's split.
ContextParallelSplit split_for_context_parallel(const PackedBatch& batch, int cp, int rank, int multiple = 1);

// The caller's row of every row of the all-gathered [cp x local T] values (-1 on padding): rank r's local rows in
// order, for r = 0..cp-1.
std::vector<int32_t> gathered_rows(const PackedBatch& batch, int cp, int multiple = 1);

// One rank of a context-parallel group, written once over a backend B: the current batch's split and the moves of
// per-row values between the caller's rows and this rank's, over the group's Comm (MPI on the CPU; NCCL on the
// engine's stream on a GPU, or a test's pair of ranks on one GPU). The split is the same host computation
// everywhere (split_for_context_parallel); its segments and row maps are copied into the backend's memory, where
// the ring attention (parallel/ring_attention.h) reads the segments and the
// transformer moves its per-row values: the logprobs and entropies of this rank's rows all-gathered into the
// caller's rows, and the caller's gradients back to this rank's rows.
template <typename B>
class ContextParallelGroup {
 public:
  // cp: the group's Comm (a device one on a GPU, whose collectives run on exec's stream); both must outlive this.
  explicit ContextParallelGroup(Comm& cp, typename B::Exec exec = {}) : cp_(cp), exec_(exec) {}
  ContextParallelGroup(const ContextParallelGroup&) = delete;
  ContextParallelGroup& operator=(const ContextParallelGroup&) = delete;

  Comm& comm() const { return cp_; }
  int size() const { return cp_.size(); }
  int rank() const { return cp_.rank(); }

  // Splits batch for this rank (local rows a multiple of `multiple`), keeps the split until the next call and
  // copies its segments and row maps into the backend's memory (the host must not touch the previous split's
  // arrays while a stream may still read them: the caller synchronizes before it splits).
  const ContextParallelSplit& split(const PackedBatch& batch, int multiple = 1);
  const ContextParallelSplit& current() const { return split_; }
  // The ring blocks' segments with the backend's arrays (ContextParallelSplit::earlier/later).
  AttentionSegments earlier() const;
  AttentionSegments later() const;

  // Collective: full[T] (the caller's rows) from every rank's local[local T] values.
  void gather_rows(const float* local, float* full);
  // This rank's rows of full[T] (0 on padding rows). Local.
  void take_local_rows(const float* full, float* local) const;

 private:
  template <typename T>
  using Array = typename B::template Array<T>;
  Comm& cp_;
  typename B::Exec exec_;
  ContextParallelSplit split_;
  std::vector<int32_t> gathered_;  // the caller's row of every all-gathered row (gathered_rows)
  Array<int32_t> segments_;        // seq_start, seq_len, half_len, second_start: [4][capacity]
  int64_t segment_capacity_ = 0;
  Array<int32_t> local_rows_;      // split_.global_row
  Array<int32_t> gathered_rows_;   // gathered_
  Array<float> all_;               // [cp x local T] all-gathered values
};

// The engines' names for the two instantiations.
using ContextParallel = ContextParallelGroup<CpuBackend>;
using GpuContextParallel = ContextParallelGroup<CudaBackend>;

}  // namespace hone
