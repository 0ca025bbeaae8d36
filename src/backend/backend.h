// The backends the model is written over: CpuBackend (fp32 reference, host memory; backend/cpu_backend.h) and, in a
// CUDA build, CudaBackend (bf16 on one GPU stream; backend/cuda_backend.h). Code above the backend is written once as
// templates over B and instantiated for each backend with HONE_FOR_EACH_BACKEND (the only place that knows whether
// the build has CUDA): dispatch is at compile time, with no virtual call per op.
//
//   template <typename B> void layer_forward(...);     // in a .cpp, written against B::Act, B::Exec and B's ops
//   #define INSTANTIATE(B) template void layer_forward<B>(...);
//   HONE_FOR_EACH_BACKEND(INSTANTIATE)
//
// with_backend(cuda, f) calls f.template operator()<B>() for the run's backend (run.device): the one place a
// run-time choice becomes a compile-time one.
#pragma once

#include <utility>

#include "backend/cpu_backend.h"
#include "backend/cuda_backend.h"
#include "runtime/error.h"

#if HONE_CUDA
#define HONE_FOR_EACH_BACKEND(X) X(::hone::CpuBackend) X(::hone::CudaBackend)
#define HONE_HAS_CUDA_BACKEND 1
#else
#define HONE_FOR_EACH_BACKEND(X) X(::hone::CpuBackend)
#define HONE_HAS_CUDA_BACKEND 0
#endif

namespace hone {

template <typename F>
decltype(auto) with_backend(bool cuda, F&& f) {
#if HONE_CUDA
  if (cuda) return std::forward<F>(f).template operator()<CudaBackend>();
#else
  if (cuda)
    throw UserError("run.device = \"cuda\": this hone was built without CUDA (rebuild with CUDA=1, or run.device = "
                    "\"cpu\")");
#endif
  return std::forward<F>(f).template operator()<CpuBackend>();
}

}  // namespace hone
