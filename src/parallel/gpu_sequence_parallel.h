// Sequence parallelism on the GPU engine: the layer hooks (model/layer_collectives.h) of training and logprobs when
// the residual stream holds this rank's rows of the tokens (parallel/sequence_chunks.h), over the tp group's
// DeviceComm; and the gathers and scatters of the embedding, the final norm and the LM head's input gradient, in
// the same layout. The GPU twin of the CPU engine's sequence rows (parallel/tensor_parallel.h), which moves the
// same chunks one after the other.
//
// Without overlap every collective runs on the compute stream (the context's), in one piece. With overlap
// (parallel.tp_comm_overlap) the layers' collectives run on a communication stream of their own, in chunks of rows,
// and the compute stream waits for a chunk only where it reads it:
//   column-parallel forward   the all-gather of chunk j+1 of the normed rows runs beside the q/k/v (gate/up) GEMMs
//                             of chunk j
//   row-parallel forward      the reduce-scatter of chunk j of the o_proj (down_proj) output runs beside the GEMM of
//                             chunk j+1
//   row-parallel backward     the all-gather of chunk j+1 of the residual gradient runs beside the input-gradient
//                             GEMM of chunk j; the weight gradient follows
//   column-parallel backward  the all-gather of the normed rows (again: the layers share one place for them) runs
//                             beside the input-gradient GEMMs, and the reduce-scatter of the input gradient's
//                             chunk j beside the later chunks' GEMMs and the weight-gradient GEMMs (as Megatron
//                             overlaps its backward)
// Every hook returns with the compute stream ordered after all of the hook's collectives: the communication stream
// never runs into the next hook's buffers, and a collective issued on the compute stream (the LM head's statistics)
// never runs beside one on the communication stream (one communicator runs one collective at a time).
// Generation never uses this (whole rows: GpuTensorParallel::layers_whole_rows), so no CUDA graph captures it.
#pragma once

#if HONE_CUDA

#include <cstdint>
#include <vector>

#include "comm/device_comm.h"
#include "cuda/ops_cuda.h"
#include "model/layer_collectives.h"
#include "parallel/sequence_chunks.h"

namespace hone {

// The deck's choices for sequence parallelism (parallel.sequence_parallel, parallel.tp_comm_overlap and
// parallel.tp_comm_overlap_chunks).
struct SequenceParallelism {
  bool on = false;
  bool overlap = false;  // the layers' collectives on a communication stream, in chunks
  int chunks = 4;        // with overlap: the chunks of rows each collective is cut into
};

class GpuSequenceParallel final : public LayerCollectives<cuda::bf16> {
 public:
  using bf16 = cuda::bf16;
  // tp (collectives ordered on the streams they are given) and ctx must outlive this object. hidden: C.
  GpuSequenceParallel(DeviceComm& tp, const cuda::GpuContext& ctx, int hidden, bool overlap, int chunks);
  ~GpuSequenceParallel() override;
  GpuSequenceParallel(const GpuSequenceParallel&) = delete;
  GpuSequenceParallel& operator=(const GpuSequenceParallel&) = delete;

  int local_rows(int T) const override { return T / tp_.size(); }
  // The layout of T tokens: one chunk without overlap.
  SequenceChunks chunks(int T) const { return SequenceChunks(T, tp_.size(), overlap_ ? chunks_ : 1); }
  bool overlapped() const { return overlap_; }

  void column_parallel_forward(const bf16* local, bf16* full, int T, int C, const RowGemm& gemm) override;
  void row_parallel_forward(bf16* y, bf16* out, int T, int C, const RowGemm& gemm) override;
  void row_parallel_backward(const bf16* dres, bf16* dy, int T, int C, const RowGemm& dgrad,
                             const Gemm& wgrad) override;
  void column_parallel_backward(const bf16* local, bf16* full, bf16* dx, bf16* out, int T, int C,
                                const RowGemm& dgrad, const Gemm& wgrad) override;

  // On the compute stream (n: local elements for the gather, full elements for the others).
  void gather_sequence(const bf16* local, bf16* full, int64_t n) override;
  void reduce_row_parallel_output(bf16* y, bf16* out, int64_t n) override { scatter_sum(y, out, n); }
  void reduce_column_parallel_input_grad(bf16* dx, bf16* out, int64_t n) override { scatter_sum(dx, out, n); }
  // This rank's rows of the sum over the group of full [T, C].
  void scatter_sum(const bf16* full, bf16* local, int64_t n);

 private:
  // Chunk j of every rank's `local` rows into `full` (all-gather), or of `full` summed into `local`
  // (reduce-scatter), on stream s.
  void gather_chunk(const SequenceChunks& ch, int j, const bf16* local, bf16* full, int C, cudaStream_t s);
  void scatter_chunk(const SequenceChunks& ch, int j, const bf16* full, bf16* local, int C, cudaStream_t s);
  // All-gathers local into full and runs each(row0, rows) on the gathered rows, with overlap chunk by chunk as the
  // chunks arrive (the column-parallel forward, the row-parallel backward).
  void gather_then(const bf16* local, bf16* full, int T, int C, const RowGemm& each);
  // Event i of the pool recorded on `from`, then waited for by `to`.
  void order(int i, cudaStream_t from, cudaStream_t to);
  cudaEvent_t event(int i) const { return events_[size_t(i)]; }

  DeviceComm& tp_;
  const cuda::GpuContext& ctx_;
  const int hidden_;
  const bool overlap_;
  const int chunks_;
  cudaStream_t comm_stream_ = nullptr;  // with overlap
  // Reused by every hook: a wait takes the record made just before it. Chunk j's event is j; then three more.
  std::vector<cudaEvent_t> events_;
  int ready_ = 0, gathered_ = 0, done_ = 0;  // indices of the three
};

}  // namespace hone

#endif  // HONE_CUDA
