// The GPU engine's bf16 weight copies: filled from the host's fp32 weights through a bounded staging buffer, and
// able to wait in pinned host memory while generation runs (train.offload_during_generation).
#pragma once

#if HONE_CUDA

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/weights.h"
#include "runtime/error.h"

namespace hone::rl {

// Host fp32 weights -> device bf16, through a bounded fp32 staging buffer.
inline void upload_bf16(const ModelWeights& w, bf16* dst, int64_t n, const cuda::GpuContext& ctx) {
  HONE_CHECK(w.flat.numel() == n, "weights of ", w.flat.numel(), " parameters for a buffer of ", n);
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(n, 1), int64_t(1) << 26);
  DeviceArray<float> staging(chunk);
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t k = std::min(chunk, n - off);
    CUDA_CHECK(cudaMemcpyAsync(staging.get(), w.flat.f32() + off, size_t(k) * sizeof(float), cudaMemcpyHostToDevice,
                               ctx.stream));
    cuda::f32_to_bf16(dst + off, staging.get(), k, ctx);
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
}

// A device buffer that can wait in pinned host memory (train.offload_during_generation): its device memory is
// freed while offloaded and allocated again (at another address) when it comes back.
class OffloadableWeights {
 public:
  explicit OffloadableWeights(int64_t n) : n_(n), device_(n, "bf16 weights") {}
  ~OffloadableWeights() {
    if (host_) cudaFreeHost(host_);
  }
  bf16* get() const { return device_.get(); }
  int64_t size() const { return n_; }
  size_t bytes() const { return device_.bytes(); }
  bool offloaded() const { return offloaded_; }
  void offload(cudaStream_t stream) {
    if (offloaded_) return;
    if (!host_) CUDA_CHECK(cudaMallocHost(&host_, size_t(n_) * sizeof(bf16)));
    CUDA_CHECK(cudaMemcpyAsync(host_, device_.get(), size_t(n_) * sizeof(bf16), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    device_ = DeviceArray<bf16>();
    offloaded_ = true;
  }
  void reload(cudaStream_t stream) {
    if (!offloaded_) return;
    device_ = DeviceArray<bf16>(n_, "bf16 weights");
    CUDA_CHECK(cudaMemcpyAsync(device_.get(), host_, size_t(n_) * sizeof(bf16), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    offloaded_ = false;
  }

 private:
  int64_t n_;
  DeviceArray<bf16> device_;
  bf16* host_ = nullptr;
  bool offloaded_ = false;
};

}  // namespace hone::rl

#endif  // HONE_CUDA
