// Per-op-family GPU time: CUDA events around each op call, summed by family ("linear", "attention", ...), for
// `hone bench --profile`. Timing every op serializes nothing on the device but adds launch overhead, so the
// profiled run is separate from the timed one.
#pragma once

#if HONE_CUDA

#include <cuda_runtime.h>

#include <string>
#include <utility>
#include <vector>

namespace hone {

class GpuOpProfiler {
 public:
  explicit GpuOpProfiler(cudaStream_t stream) : stream_(stream) {}
  ~GpuOpProfiler();
  GpuOpProfiler(const GpuOpProfiler&) = delete;
  GpuOpProfiler& operator=(const GpuOpProfiler&) = delete;

  void begin(const char* family);  // family: a string literal
  void end();
  // Waits for the recorded events and adds their times to the totals; the events are reused afterwards.
  void collect();
  // Milliseconds per family, in order of first appearance (after collect()).
  const std::vector<std::pair<std::string, double>>& totals_ms() const { return totals_; }
  void clear() { totals_.clear(); }

 private:
  struct Pair {
    cudaEvent_t start = nullptr, stop = nullptr;
    const char* family = nullptr;
  };
  cudaStream_t stream_;
  std::vector<Pair> pairs_;
  size_t used_ = 0;
  std::vector<std::pair<std::string, double>> totals_;
};

// Times one op call when a profiler is given; nothing otherwise.
class ProfileScope {
 public:
  ProfileScope(GpuOpProfiler* p, const char* family) : p_(p) {
    if (p_) p_->begin(family);
  }
  ~ProfileScope() {
    if (p_) p_->end();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  GpuOpProfiler* p_;
};

}  // namespace hone

#endif  // HONE_CUDA
