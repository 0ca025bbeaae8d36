// A memory policy of the CUDA backend: bf16 weight copies that can wait in pinned host memory while generation runs
// (train.offload_during_generation; the GPU engine's training and reference copies). CudaBackend::upload_weights
// (backend/cuda_backend.h) fills them. The CPU has no such policy: its weights stay in host memory.
#pragma once

#if HONE_CUDA

#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"

namespace hone {

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

}  // namespace hone

#endif  // HONE_CUDA
