// The points of a decoder layer where a sharded layer's partial results cross ranks. A layer body (CPU:
// model/transformer_layer.h, GPU: model/gpu_transformer_layer.h) calls these hooks at these points and nowhere
// else; with one tensor-parallel rank there is no hook (nullptr) and nothing crosses. The hooks of a parallelism
// live in that parallelism's own files, which own the communicator and the stream.
//
// Megatron's split: a column-parallel GEMM (q/k/v, gate/up) reads the whole hidden state and writes this rank's
// slice of its outputs; a row-parallel GEMM (o_proj, down_proj) reads the slice and writes a partial sum of the
// whole hidden state. So the forward reduces after each row-parallel GEMM, and the backward reduces the input
// gradient after the column-parallel GEMMs of each branch. Plain header: .cu-safe.
#pragma once

#include <cstdint>

namespace hone {

// E: the element type of the residual stream (float on the CPU, bf16 on the GPU).
template <typename E>
class LayerCollectives {
 public:
  virtual ~LayerCollectives() = default;
  // Forward, after o_proj and after down_proj: y [T, C] holds this rank's partial sum; on return, the sum.
  virtual void reduce_row_parallel_output(E* y, int64_t n) = 0;
  // Backward, after the input gradients of q/k/v and of gate/up: dx [T, C] holds this rank's partial sum.
  virtual void reduce_column_parallel_input_grad(E* dx, int64_t n) = 0;
};

}  // namespace hone
