// What generation (generation/generation_forward.h) asks of a backend's memory and launches, on the GPU: ranges of
// device memory that can give their physical memory back between GRPO steps and map fresh memory at the same
// addresses (virtual memory, cuda/virtual_device_buffer.h), and decode steps captured once per batch-size bucket
// and replayed from CUDA graphs. The CPU's twins are plain buffers and eager steps (backend/host_generation_memory.h).
#pragma once

#if HONE_CUDA

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "backend/cuda_backend.h"
#include "cuda/virtual_device_buffer.h"

namespace hone {

// One range of generation's device memory: virtual (its physical memory can be given back and mapped again at the
// same address) or plain device memory.
class CudaGenerationRegion {
 public:
  char* allocate(size_t bytes, bool virtual_memory, const char* what);  // frees what it held first
  char* data() const { return vmm_.reserved() ? static_cast<char*>(vmm_.data()) : plain_.get(); }
  bool is_virtual() const { return vmm_.reserved(); }
  void unmap() { vmm_.unmap(); }
  bool try_map() { return vmm_.try_map(); }
  void free();

 private:
  cuda::VirtualDeviceBuffer vmm_;
  DeviceArray<char> plain_;
};

// Decode steps, keyed by their batch-size bucket, replayed from CUDA graphs: a bucket's first step runs eagerly
// (its GEMM plans and kernel attributes get made outside capture), then is captured and replayed from then on.
// The graphs bake in the kernel scratch pointer: run() sizes the scratch for the largest step first and captures
// again when it moved.
class CudaDecodeGraphs {
 public:
  static constexpr bool kGraphs = true;
  CudaDecodeGraphs() = default;
  ~CudaDecodeGraphs() { drop(); }
  CudaDecodeGraphs(const CudaDecodeGraphs&) = delete;
  CudaDecodeGraphs& operator=(const CudaDecodeGraphs&) = delete;

  void run(int bucket, const CudaBackend::Exec& x, size_t scratch_bytes, const std::function<void()>& pass);
  void drop();  // the graphs go (the buffers they read moved or are freed)
  int64_t replays() const { return replays_; }
  int64_t captures() const { return captures_; }

 private:
  std::map<int, cudaGraphExec_t> graphs_;
  void* scratch_ = nullptr;  // the kernel scratch pointer the graphs were captured with
  int64_t replays_ = 0, captures_ = 0;
};

// Whether generation can keep its memory's addresses (and so its decode graphs) across a release(): the device has
// virtual memory management and, under tensor parallelism, NCCL does not register graph-captured buffers
// (NCCL_GRAPH_REGISTER=0, which NcclComm sets unless the environment chose: a registered buffer is mapped by the
// peers, and their mapping would outlive release()). Says why not at debug level.
bool cuda_generation_keeps_addresses(bool tensor_parallel);

}  // namespace hone

#endif  // HONE_CUDA
