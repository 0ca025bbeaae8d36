// The per-context scratch buffer of cuda/kernel_scratch.h, held in GpuContextImpl::scratch_state.
#include "cuda/kernel_scratch.h"

#include <memory>

#include "cuda/check.h"
#include "cuda/gpu_context_impl.h"

namespace hone::cuda {

namespace {

struct KernelScratch {
  void* device = nullptr;
  size_t bytes = 0;
  double* host = nullptr;
  KernelScratch() = default;
  KernelScratch(const KernelScratch&) = delete;
  KernelScratch& operator=(const KernelScratch&) = delete;
  ~KernelScratch() {  // destroy_gpu_context synchronizes the stream before it resets the state
    if (device) cudaFree(device);
    if (host) cudaFreeHost(host);
  }
};

KernelScratch& scratch_of(const GpuContext& ctx) {
  HONE_CHECK(ctx.impl != nullptr, "GPU context not created");
  if (!ctx.impl->scratch_state) ctx.impl->scratch_state = std::make_shared<KernelScratch>();
  return *static_cast<KernelScratch*>(ctx.impl->scratch_state.get());
}

}  // namespace

void* kernel_scratch(const GpuContext& ctx, size_t bytes) {
  KernelScratch& s = scratch_of(ctx);
  if (bytes > s.bytes) {
    if (s.device) {
      CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
      CUDA_CHECK(cudaFree(s.device));
      s.device = nullptr;
      s.bytes = 0;
    }
    const size_t grow = bytes < (size_t(1) << 20) ? (size_t(1) << 20) : bytes;  // at least 1 MiB: few regrowths
    CUDA_CHECK(cudaMalloc(&s.device, grow));
    s.bytes = grow;
  }
  return s.device;
}

double* kernel_scratch_host_double(const GpuContext& ctx) {
  KernelScratch& s = scratch_of(ctx);
  if (!s.host) CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&s.host), sizeof(double)));
  return s.host;
}

}  // namespace hone::cuda
