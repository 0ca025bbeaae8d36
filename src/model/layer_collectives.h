// The points of a decoder layer where a sharded layer's partial results cross ranks. The layer body
// (model/transformer_layer.h, over either backend) calls these hooks at these points and nowhere
// else; with one tensor-parallel rank there is no hook (nullptr) and nothing crosses. The hooks of a parallelism
// live in that parallelism's own files, which own the communicator and the streams.
//
// Megatron's split: a column-parallel GEMM (q/k/v, gate/up) reads the whole hidden state and writes this rank's
// slice of its outputs; a row-parallel GEMM (o_proj, down_proj) reads the slice and writes a partial sum of the
// whole hidden state. So the forward reduces after each row-parallel GEMM, and the backward reduces the input
// gradient after the column-parallel GEMMs of each branch.
//
// Sequence parallelism (Megatron's sequence_parallel) also splits the tokens where the work is per token: the
// residual stream, the norms and the residual adds hold local_rows(T) = T / tp rows (this rank's rows of the T
// tokens: parallel/sequence_chunks.h). The normed hidden state is all-gathered to T rows before each
// column-parallel GEMM (and the residual gradient before each row-parallel GEMM's backward), and the reductions
// become reduce-scatters into the local rows: the same bytes on the wire as the all-reduces, 1/tp of the per-token
// memory and work. Without it, local_rows(T) = T and gather_sequence is never called.
//
// The layer body hands each group of GEMMs to the hook that brackets it with its collective (column_parallel_*,
// row_parallel_*): the GEMMs as functions of a range of rows, so that a parallelism may move the rows in chunks and
// run the GEMMs of the chunks already moved while the next chunk crosses ranks (the GPU engine's
// parallel.tp_comm_overlap). The defaults below run them in one piece around the three primitives. Plain header:
// .cu-safe.
#pragma once

#include <cstdint>
#include <functional>

namespace hone {

// E: the element type of the residual stream (float on the CPU, bf16 on the GPU).
template <typename E>
class LayerCollectives {
 public:
  // GEMMs over rows [row0, row0 + rows) of the T tokens (of their input and output alike).
  using RowGemm = std::function<void(int row0, int rows)>;
  // GEMMs over all T rows (the weight gradients: a sum over the tokens).
  using Gemm = std::function<void()>;

  virtual ~LayerCollectives() = default;
  // Rows of the residual stream this rank holds for a batch of T tokens (T must then be a multiple of tp).
  virtual int local_rows(int T) const { return T; }
  bool sequence_parallel_for(int T) const { return local_rows(T) != T; }

  // ---- the GEMMs with their collectives, as the layer body calls them (C: the hidden size) ----
  // Forward of the column-parallel GEMMs (q/k/v; gate/up) reading the normed hidden state `local` [local_rows(T),
  // C], all-gathered into full [T, C] under sequence parallelism (without it full is local). gemm(row0, rows) runs
  // the GEMMs on those rows of full; the calls cover [0, T) once each, each after its rows are there.
  virtual void column_parallel_forward(const E* local, E* full, int T, int C, const RowGemm& gemm) {
    if (sequence_parallel_for(T)) gather_sequence(local, full, int64_t(local_rows(T)) * C);
    gemm(0, T);
  }
  // Forward of a row-parallel GEMM (o_proj; down_proj): gemm(row0, rows) writes those rows of y [T, C], this
  // rank's partial sums (covering [0, T) once each); out gets the sum, all T rows (out may be y) or, under
  // sequence parallelism, this rank's rows.
  virtual void row_parallel_forward(E* y, E* out, int T, int C, const RowGemm& gemm) {
    gemm(0, T);
    reduce_row_parallel_output(y, out, int64_t(T) * C);
  }
  // Backward of a row-parallel GEMM: the residual gradient dres [local_rows(T), C] is all-gathered into dy [T, C]
  // under sequence parallelism (without it dy is dres). dgrad(row0, rows) forms the input gradient of those rows
  // from those rows of dy (covering [0, T) once each); wgrad() the weight gradient from all of dy.
  virtual void row_parallel_backward(const E* dres, E* dy, int T, int C, const RowGemm& dgrad, const Gemm& wgrad) {
    if (sequence_parallel_for(T)) gather_sequence(dres, dy, int64_t(local_rows(T)) * C);
    dgrad(0, T);
    wgrad();
  }
  // Backward of the column-parallel GEMMs: dgrad(row0, rows) forms those rows of the input gradient dx [T, C],
  // this rank's partial sums (covering [0, T) once each, so the first GEMM of each call may write its rows rather
  // than add to them); wgrad() forms the weight gradients from the forward's input full [T, C], all-gathered again
  // from `local` under sequence parallelism (the layers share one place for the gathered rows). out gets dx's sum:
  // all T rows (out may be dx) or this rank's rows.
  virtual void column_parallel_backward(const E* local, E* full, E* dx, E* out, int T, int C, const RowGemm& dgrad,
                                        const Gemm& wgrad) {
    dgrad(0, T);
    if (sequence_parallel_for(T)) gather_sequence(local, full, int64_t(local_rows(T)) * C);
    wgrad();
    reduce_column_parallel_input_grad(dx, out, int64_t(T) * C);
  }

  // ---- what crosses ranks ----
  // Sequence parallelism: full [T, C] gets every rank's local [T / tp, C] rows in the token order (n: local
  // elements).
  virtual void gather_sequence(const E* local, E* full, int64_t n) = 0;
  // Forward, after o_proj and after down_proj: y [T, C] holds this rank's partial sum; out gets the sum, all T rows
  // (out may be y) or, under sequence parallelism, this rank's rows. n: the elements of y.
  virtual void reduce_row_parallel_output(E* y, E* out, int64_t n) = 0;
  // Backward, after the input gradients of q/k/v and of gate/up: dx [T, C] holds this rank's partial sum; out as
  // above.
  virtual void reduce_column_parallel_input_grad(E* dx, E* out, int64_t n) = 0;
};

}  // namespace hone
