// Context parallelism on the GPU engine: the device copies of a split and the moves of per-row values (see
// gpu_context_parallel.h).
#include "parallel/gpu_context_parallel.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "cuda/context_parallel_kernels.h"
#include "runtime/error.h"

namespace hone {
namespace {

template <typename T>
void ensure(DeviceArray<T>& a, int64_t n, const char* what) {
  if (a.size() < n) a = DeviceArray<T>(n + n / 4, what);
}

void upload(int32_t* dst, const std::vector<int32_t>& src, cudaStream_t stream) {
  if (!src.empty())
    CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
}

}  // namespace

const ContextParallelSplit& GpuContextParallel::split(const PackedBatch& batch, int multiple) {
  split_ = split_for_context_parallel(batch, size(), rank(), multiple);
  gathered_ = gathered_rows(batch, size(), multiple);
  const int64_t S = int64_t(split_.seq_start.size()), T = split_.local_tokens();
  if (segments_.size() < 4 * S) {
    segments_ = DeviceArray<int32_t>(4 * (S + S / 4 + 1), "context-parallel segments");
    segment_capacity_ = S + S / 4 + 1;
  }
  ensure(local_rows_, T, "context-parallel local rows");
  ensure(gathered_rows_, int64_t(gathered_.size()), "context-parallel gathered rows");
  ensure(all_, int64_t(gathered_.size()), "context-parallel gathered values");
  int32_t* seg = segments_.get();
  upload(seg, split_.seq_start, ctx_.stream);
  upload(seg + segment_capacity_, split_.seq_len, ctx_.stream);
  upload(seg + 2 * segment_capacity_, split_.half_len, ctx_.stream);
  upload(seg + 3 * segment_capacity_, split_.second_start, ctx_.stream);
  upload(local_rows_.get(), split_.global_row, ctx_.stream);
  upload(gathered_rows_.get(), gathered_, ctx_.stream);
  return split_;
}

AttentionSegments GpuContextParallel::earlier() const {
  AttentionSegments s = split_.earlier();
  const int32_t* seg = segments_.get();
  s.q_start = seg;
  s.q_len = seg + segment_capacity_;
  s.kv_start = seg;
  s.kv_len = seg + 2 * segment_capacity_;
  return s;
}

AttentionSegments GpuContextParallel::later() const {
  AttentionSegments s = split_.later();
  const int32_t* seg = segments_.get();
  s.q_start = seg + 3 * segment_capacity_;
  s.q_len = seg + 2 * segment_capacity_;
  s.kv_start = seg;
  s.kv_len = seg + segment_capacity_;
  return s;
}

void GpuContextParallel::gather_rows(const float* local, float* full) {
  const int64_t n = split_.local_tokens();
  cp_.all_gather(local, all_.get(), n);
  cuda::scatter_rows_f32(full, all_.get(), gathered_rows_.get(), int64_t(gathered_.size()), ctx_);
}

void GpuContextParallel::take_local_rows(const float* full, float* local) const {
  cuda::take_rows_f32(local, full, local_rows_.get(), split_.local_tokens(), ctx_);
}

}  // namespace hone

#endif  // HONE_CUDA
