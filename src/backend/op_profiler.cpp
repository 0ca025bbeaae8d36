// GpuOpProfiler: event pairs recorded on the stream, summed by family on collect().
#include "backend/op_profiler.h"

#if HONE_CUDA

#include "cuda/check.h"

namespace hone {

GpuOpProfiler::~GpuOpProfiler() {
  for (Pair& p : pairs_) {
    cudaEventDestroy(p.start);
    cudaEventDestroy(p.stop);
  }
}

void GpuOpProfiler::begin(const char* family) {
  if (used_ == pairs_.size()) {
    Pair p;
    CUDA_CHECK(cudaEventCreate(&p.start));
    CUDA_CHECK(cudaEventCreate(&p.stop));
    pairs_.push_back(p);
  }
  Pair& p = pairs_[used_];
  p.family = family;
  CUDA_CHECK(cudaEventRecord(p.start, stream_));
}

void GpuOpProfiler::end() {
  HONE_CHECK(used_ < pairs_.size(), "GpuOpProfiler::end without begin");
  CUDA_CHECK(cudaEventRecord(pairs_[used_].stop, stream_));
  ++used_;
}

void GpuOpProfiler::collect() {
  for (size_t i = 0; i < used_; ++i) {
    Pair& p = pairs_[i];
    CUDA_CHECK(cudaEventSynchronize(p.stop));
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    bool found = false;
    for (auto& [name, total] : totals_)
      if (name == p.family) {
        total += ms;
        found = true;
        break;
      }
    if (!found) totals_.emplace_back(p.family, double(ms));
  }
  used_ = 0;
}

}  // namespace hone

#endif  // HONE_CUDA
