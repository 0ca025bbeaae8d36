// EngineDevice<CudaBackend> (backend/engine_device.h): the rank's GPU, its context and its NCCL communicators.
#include "backend/engine_device.h"

#if HONE_CUDA

#include <cuda_runtime.h>

#include "backend/gpu_device_select.h"
#include "comm/nccl_comm.h"
#include "cuda/check.h"
#include "cuda/device_memory.h"
#include "runtime/error.h"

namespace hone {

EngineDevice<CudaBackend>::EngineDevice() : device_(select_rank_device().device) {
  ctx_ = cuda::create_gpu_context(device_);
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = prop.name;
}

EngineDevice<CudaBackend>::~EngineDevice() { cuda::destroy_gpu_context(ctx_); }

std::string EngineDevice<CudaBackend>::describe() const { return cat("cuda:", device_, " ", name_, ", bf16"); }

void EngineDevice<CudaBackend>::synchronize() const { CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

double EngineDevice<CudaBackend>::free_bytes() const {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return double(free_b);
}

double EngineDevice<CudaBackend>::used_bytes() const { return double(cuda::device_memory_info().used_bytes()); }

namespace {
NcclOptions nccl_options(const GroupCommOptions& o, cudaStream_t engine) {
  NcclOptions n;
  n.timeout_s = o.timeout_s;
  n.stream = o.on_engine_stream ? engine : nullptr;
  n.stream_ordered = o.stream_ordered;
  return n;
}
}  // namespace

GroupComm EngineDevice<CudaBackend>::comm(const ParallelState& ps, CommGroup g, const GroupCommOptions& o) const {
  return GroupComm(std::unique_ptr<Comm>(ps.device(g, nccl_options(o, ctx_.stream))));
}

GroupComm EngineDevice<CudaBackend>::comm(Comm& host, const GroupCommOptions& o) const {
  return GroupComm(std::make_unique<NcclComm>(host, nccl_options(o, ctx_.stream)));
}

}  // namespace hone

#endif  // HONE_CUDA
