// GpuContext: one stream, the cuBLASLt and cuDNN handles and the GEMM workspace for one device.
#include "cuda/check.h"
#include "cuda/gpu_context_impl.h"
#include "backend/gpu_device_select.h"

namespace hone::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t(64) << 20;  // cuBLASLt on Hopper wants >= 32 MiB for its best kernels
}

GpuContext create_gpu_context(int device) {
  // A machine without a usable driver or device is one line and exit 2 for every command that gets here.
  HONE_USER_CHECK(device < usable_cuda_devices("CUDA"), "CUDA device ", device, " is not visible");
  CUDA_CHECK(cudaSetDevice(device));
  GpuContext ctx;
  auto* impl = new GpuContextImpl();
  impl->device = device;
  CUDA_CHECK(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasLtCreate(&impl->cublaslt));
  CUDA_CHECK(cudaMalloc(&impl->workspace, kWorkspaceBytes));
  impl->workspace_bytes = kWorkspaceBytes;
  CUDNN_CHECK(cudnnCreate(&impl->cudnn));
  CUDNN_CHECK(cudnnSetStream(impl->cudnn, ctx.stream));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  ctx.sm_count = prop.multiProcessorCount;
  ctx.impl = impl;
  return ctx;
}

void destroy_gpu_context(GpuContext& ctx) {
  if (!ctx.impl) return;
  GpuContextImpl* impl = ctx.impl;
  cudaStreamSynchronize(ctx.stream);
  impl->gemm_state.reset();
  impl->attention_state.reset();
  impl->scratch_state.reset();
  if (impl->cudnn) cudnnDestroy(impl->cudnn);
  if (impl->workspace) cudaFree(impl->workspace);
  if (impl->cublaslt) cublasLtDestroy(impl->cublaslt);
  if (ctx.stream) cudaStreamDestroy(ctx.stream);
  delete impl;
  ctx = GpuContext{};
}

}  // namespace hone::cuda
