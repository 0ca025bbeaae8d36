// Checks for CUDA, cuBLAS, cuDNN and NCCL calls: on failure they throw hone::Error naming the call, the library's
// description of the status, the status name, file and line, e.g.
//   CUDA_CHECK(cudaMalloc(&p, n)) failed: out of memory (cudaErrorMemoryAllocation) at cuda/x.cu:12
// CUDA_CHECK_LAST() goes after a kernel launch (a bad launch configuration is reported by cudaGetLastError).
// Plain header for .cu and .cpp files of a CUDA build (HONE_CUDA=1): only CUDA headers and runtime/error.h.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "runtime/error.h"

namespace hone::detail {

inline std::string cuda_status_text(cudaError_t s) {
  return cat(cudaGetErrorString(s), " (", cudaGetErrorName(s), ")");
}

inline std::string cublas_status_text(cublasStatus_t s) {
  return cat(cublasGetStatusString(s), " (", cublasGetStatusName(s), ")");
}

inline std::string cudnn_status_text(cudnnStatus_t s) {
  std::string text = cudnnGetErrorString(s);  // the status name, e.g. CUDNN_STATUS_BAD_PARAM
  char last[512] = {};
  cudnnGetLastErrorString(last, sizeof(last));  // cuDNN's own explanation of the most recent failure, if any
  if (last[0]) text += cat(": ", last);
  return text;
}

inline const char* nccl_status_name(ncclResult_t s) {
  switch (s) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult_t unknown";
  }
}

inline std::string nccl_status_text(ncclResult_t s) {
  std::string text = cat(ncclGetErrorString(s), " (", nccl_status_name(s), ")");
  const char* last = ncclGetLastError(nullptr);  // NCCL's detail on the most recent failure, if any
  if (last && *last) text += cat(": ", last);
  return text;
}

}  // namespace hone::detail

#define HONE_LIBRARY_CHECK_(macro, expr_text, call, type, ok, text_fn)                        \
  do {                                                                                        \
    const type hone_status_ = (call);                                                         \
    if (hone_status_ != (ok))                                                                 \
      ::hone::detail::call_failed(macro, expr_text, ::hone::detail::text_fn(hone_status_),   \
                                  __FILE__, __LINE__);                                        \
  } while (0)

#define CUDA_CHECK(call) HONE_LIBRARY_CHECK_("CUDA_CHECK", #call, call, cudaError_t, cudaSuccess, cuda_status_text)
#define CUDA_CHECK_LAST() \
  HONE_LIBRARY_CHECK_("CUDA_CHECK_LAST", "", cudaGetLastError(), cudaError_t, cudaSuccess, cuda_status_text)
#define CUBLAS_CHECK(call) \
  HONE_LIBRARY_CHECK_("CUBLAS_CHECK", #call, call, cublasStatus_t, CUBLAS_STATUS_SUCCESS, cublas_status_text)
#define CUDNN_CHECK(call) \
  HONE_LIBRARY_CHECK_("CUDNN_CHECK", #call, call, cudnnStatus_t, CUDNN_STATUS_SUCCESS, cudnn_status_text)
#define NCCL_CHECK(call) HONE_LIBRARY_CHECK_("NCCL_CHECK", #call, call, ncclResult_t, ncclSuccess, nccl_status_text)
