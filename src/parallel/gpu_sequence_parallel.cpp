// The GPU engine's sequence-parallel layer hooks, in one piece or chunked and overlapped (gpu_sequence_parallel.h).
#include "parallel/gpu_sequence_parallel.h"

#if HONE_CUDA

#include <algorithm>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone {
namespace {

// bf16 crosses ranks as raw 16-bit values (Comm's convention); the sums are NCCL's bf16 sums.
const uint16_t* bits(const cuda::bf16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits(cuda::bf16* p) { return reinterpret_cast<uint16_t*>(p); }

}  // namespace

GpuSequenceParallel::GpuSequenceParallel(DeviceComm& tp, const cuda::GpuContext& ctx, int hidden, bool overlap,
                                         int chunks)
    : tp_(tp), ctx_(ctx), hidden_(hidden), overlap_(overlap), chunks_(std::max(1, chunks)) {
  HONE_CHECK(tp.size() > 1, "sequence parallelism needs a tensor-parallel group of two ranks or more");
  if (!overlap_) return;
  // The collectives' kernels are few and short: a higher priority lets them start as soon as their chunk is ready
  // instead of queuing behind the GEMMs' blocks.
  int least = 0, greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
  events_.resize(size_t(chunks_) + 3);
  for (cudaEvent_t& e : events_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ready_ = chunks_, gathered_ = chunks_ + 1, done_ = chunks_ + 2;
}

GpuSequenceParallel::~GpuSequenceParallel() {
  if (comm_stream_) cudaStreamSynchronize(comm_stream_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (comm_stream_) cudaStreamDestroy(comm_stream_);
}

void GpuSequenceParallel::order(int i, cudaStream_t from, cudaStream_t to) {
  CUDA_CHECK(cudaEventRecord(event(i), from));
  CUDA_CHECK(cudaStreamWaitEvent(to, event(i), 0));
}

void GpuSequenceParallel::gather_chunk(const SequenceChunks& ch, int j, const bf16* local, bf16* full, int C,
                                       cudaStream_t s) {
  tp_.all_gather_on(bits(local) + int64_t(ch.local_begin(j)) * C, bits(full) + int64_t(ch.global_begin(j)) * C,
                    int64_t(ch.rows(j)) * C, s);
}

void GpuSequenceParallel::scatter_chunk(const SequenceChunks& ch, int j, const bf16* full, bf16* local, int C,
                                        cudaStream_t s) {
  tp_.reduce_scatter_sum_on(bits(full) + int64_t(ch.global_begin(j)) * C, bits(local) + int64_t(ch.local_begin(j)) * C,
                            int64_t(ch.rows(j)) * C, s);
}

void GpuSequenceParallel::gather_sequence(const bf16* local, bf16* full, int64_t n) {
  const SequenceChunks ch = chunks(int(n / hidden_) * tp_.size());
  for (int j = 0; j < ch.count(); ++j) gather_chunk(ch, j, local, full, hidden_, ctx_.stream);
}

void GpuSequenceParallel::scatter_sum(const bf16* full, bf16* local, int64_t n) {
  const SequenceChunks ch = chunks(int(n / hidden_));
  for (int j = 0; j < ch.count(); ++j) scatter_chunk(ch, j, full, local, hidden_, ctx_.stream);
}

void GpuSequenceParallel::gather_then(const bf16* local, bf16* full, int T, int C, const RowGemm& each) {
  if (!overlap_) {
    gather_sequence(local, full, int64_t(local_rows(T)) * C);
    each(0, T);
    return;
  }
  const SequenceChunks ch = chunks(T);
  const cudaStream_t compute = ctx_.stream, comm = comm_stream_;
  order(ready_, compute, comm);  // local is written; the last readers of full are done
  for (int j = 0; j < ch.count(); ++j) {
    gather_chunk(ch, j, local, full, C, comm);
    CUDA_CHECK(cudaEventRecord(event(j), comm));
  }
  for (int j = 0; j < ch.count(); ++j) {
    CUDA_CHECK(cudaStreamWaitEvent(compute, event(j), 0));
    each(ch.global_begin(j), ch.global_rows(j));
  }
}

void GpuSequenceParallel::column_parallel_forward(const bf16* local, bf16* full, int T, int C, const RowGemm& gemm) {
  gather_then(local, full, T, C, gemm);
}

void GpuSequenceParallel::row_parallel_forward(bf16* y, bf16* out, int T, int C, const RowGemm& gemm) {
  if (!overlap_) {
    gemm(0, T);
    scatter_sum(y, out, int64_t(T) * C);
    return;
  }
  const SequenceChunks ch = chunks(T);
  const cudaStream_t compute = ctx_.stream, comm = comm_stream_;
  for (int j = 0; j < ch.count(); ++j) {
    gemm(ch.global_begin(j), ch.global_rows(j));
    order(j, compute, comm);  // chunk j's partial sums are written
    scatter_chunk(ch, j, y, out, C, comm);
  }
  order(done_, comm, compute);
}

void GpuSequenceParallel::row_parallel_backward(const bf16* dres, bf16* dy, int T, int C, const RowGemm& dgrad,
                                                const Gemm& wgrad) {
  gather_then(dres, dy, T, C, dgrad);
  wgrad();
}

void GpuSequenceParallel::column_parallel_backward(const bf16* local, bf16* full, bf16* dx, bf16* out, int T, int C,
                                                   const RowGemm& dgrad, const Gemm& wgrad) {
  if (!overlap_) {
    dgrad(0, T);
    gather_sequence(local, full, int64_t(local_rows(T)) * C);
    wgrad();
    scatter_sum(dx, out, int64_t(T) * C);
    return;
  }
  const SequenceChunks ch = chunks(T);
  const cudaStream_t compute = ctx_.stream, comm = comm_stream_;
  order(ready_, compute, comm);
  for (int j = 0; j < ch.count(); ++j) gather_chunk(ch, j, local, full, C, comm);
  CUDA_CHECK(cudaEventRecord(event(gathered_), comm));
  for (int j = 0; j < ch.count(); ++j) {
    dgrad(ch.global_begin(j), ch.global_rows(j));
    order(j, compute, comm);  // chunk j of the input gradient is complete
    scatter_chunk(ch, j, dx, out, C, comm);
  }
  CUDA_CHECK(cudaEventRecord(event(done_), comm));
  CUDA_CHECK(cudaStreamWaitEvent(compute, event(gathered_), 0));
  wgrad();
  CUDA_CHECK(cudaStreamWaitEvent(compute, event(done_), 0));
}

}  // namespace hone

#endif  // HONE_CUDA
