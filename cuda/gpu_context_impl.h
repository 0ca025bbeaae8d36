// What a GpuContext holds besides its stream: library handles, the GEMM workspace, and per-module state
// (GEMM algorithm cache, cuDNN attention plan cache) that each module creates on first use. Host-only users
// (.cpp files of cuda/) include this; kernels (.cu) need only ops_cuda.h.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <memory>

#include "cuda/ops_cuda.h"

namespace hone::cuda {

struct GpuContextImpl {
  int device = 0;
  cublasLtHandle_t cublaslt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace, device memory
  size_t workspace_bytes = 0;
  cudnnHandle_t cudnn = nullptr;
  std::shared_ptr<void> gemm_state;       // owned by cuda/gemm.cpp
  std::shared_ptr<void> attention_state;  // owned by cuda/attention_cudnn.cpp
  std::shared_ptr<void> scratch_state;    // owned by kernels needing a small persistent device buffer
};

}  // namespace hone::cuda
