// The points of a decoder layer where a sharded layer's partial results cross ranks. A layer body (CPU:
// model/transformer_layer.h, GPU: model/gpu_transformer_layer.h) calls these hooks at these points and nowhere
// else; with one tensor-parallel rank there is no hook (nullptr) and nothing crosses. The hooks of a parallelism
// live in that parallelism's own files, which own the communicator and the stream.
//
// Megatron's split: a column-parallel GEMM (q/k/v, gate/up) reads the whole hidden state and writes this rank's
// slice of its outputs; a row-parallel GEMM (o_proj, down_proj) reads the slice and writes a partial sum of the
// whole hidden state. So the forward reduces after each row-parallel GEMM, and the backward reduces the input
// gradient after the column-parallel GEMMs of each branch.
//
// Sequence parallelism (Megatron's sequence_parallel) also splits the tokens where the work is per token: the
// residual stream, the norms and the residual adds hold local_rows(T) = T / tp rows (this rank's consecutive slice
// of the T tokens). The normed hidden state is all-gathered to T rows before each column-parallel GEMM (and the
// residual gradient before each row-parallel GEMM's backward), and the reductions become reduce-scatters into the
// local rows: the same bytes on the wire as the all-reduces, 1/tp of the per-token memory and work. Without it,
// local_rows(T) = T and gather_sequence is never called. Plain header: .cu-safe.
#pragma once

#include <cstdint>

namespace hone {

// E: the element type of the residual stream (float on the CPU, bf16 on the GPU).
template <typename E>
class LayerCollectives {
 public:
  virtual ~LayerCollectives() = default;
  // Rows of the residual stream this rank holds for a batch of T tokens (T must then be a multiple of tp).
  virtual int local_rows(int T) const { return T; }
  bool sequence_parallel_for(int T) const { return local_rows(T) != T; }
  // Sequence parallelism: full [T, C] gets every rank's local [T / tp, C] rows, in rank order (n: local elements).
  virtual void gather_sequence(const E* local, E* full, int64_t n) = 0;
  // Forward, after o_proj and after down_proj: y [T, C] holds this rank's partial sum; out gets the sum, all T rows
  // (out may be y) or, under sequence parallelism, this rank's rows. n: the elements of y.
  virtual void reduce_row_parallel_output(E* y, E* out, int64_t n) = 0;
  // Backward, after the input gradients of q/k/v and of gate/up: dx [T, C] holds this rank's partial sum; out as
  // above.
  virtual void reduce_column_parallel_input_grad(E* dx, E* out, int64_t n) = 0;
};

}  // namespace hone
