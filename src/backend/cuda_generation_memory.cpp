// Generation's device memory regions and decode graphs (see cuda_generation_memory.h).
#include "backend/cuda_generation_memory.h"

#if HONE_CUDA

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/check.h"
#include "cuda/kernel_scratch.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone {

char* CudaGenerationRegion::allocate(size_t bytes, bool virtual_memory, const char* what) {
  free();
  if (!virtual_memory) {
    plain_ = DeviceArray<char>(int64_t(bytes), what);
    return plain_.get();
  }
  vmm_.reserve(bytes, what);
  try {
    vmm_.map();
  } catch (...) {
    vmm_.release();
    throw;
  }
  return static_cast<char*>(vmm_.data());
}

void CudaGenerationRegion::free() {
  plain_ = DeviceArray<char>();
  vmm_.release();
}

void CudaDecodeGraphs::run(int bucket, const CudaBackend::Exec& x, size_t scratch_bytes,
                           const std::function<void()>& pass) {
  const cuda::GpuContext& ctx = x.ctx();
  void* scratch = cuda::kernel_scratch(ctx, std::max<size_t>(scratch_bytes, 256));
  if (scratch != scratch_) {
    drop();
    scratch_ = scratch;
  }
  auto it = graphs_.find(bucket);
  if (it != graphs_.end()) {
    CUDA_CHECK(cudaGraphLaunch(it->second, ctx.stream));
    ++replays_;
    return;
  }
  pass();
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  try {
    pass();
  } catch (...) {
    cudaStreamEndCapture(ctx.stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(e);
  graphs_[bucket] = exec;
  ++captures_;
}

void CudaDecodeGraphs::drop() {
  for (auto& [b, g] : graphs_)
    if (g) cudaGraphExecDestroy(g);
  graphs_.clear();
  scratch_ = nullptr;
}

bool cuda_generation_keeps_addresses(bool tensor_parallel) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  // Keeping is an optimization: a driver that cannot answer leaves generation as it was, not failing.
  bool vmm = false;
  std::string why;
  try {
    vmm = cuda::VirtualDeviceBuffer::supported(device);
  } catch (const Error& e) {
    why = cat(" (", e.what(), ")");
  }
  if (!vmm) {
    log_debug("generation.keep_graphs: device ", device, " has no virtual memory management", why,
              "; the decode graphs are captured again every step");
    return false;
  }
  if (tensor_parallel) {
    const char* reg = std::getenv("NCCL_GRAPH_REGISTER");
    if (!reg || std::strcmp(reg, "0") != 0) {
      log_debug("generation.keep_graphs: NCCL_GRAPH_REGISTER is ", reg ? reg : "unset", " (not 0): NCCL may map ",
                "the buffers of captured collectives on the peers, so the decode graphs are captured again every step");
      return false;
    }
  }
  return true;
}

}  // namespace hone

#endif  // HONE_CUDA
