// The backends the model is written over: CpuBackend (fp32 reference, host memory; backend/cpu_backend.h) and, in a
// CUDA build, CudaBackend (bf16 on one GPU stream; backend/cuda_backend.h). Code above the backend is written once as
// templates over B and instantiated for each backend with HONE_FOR_EACH_BACKEND (the only place that knows whether
// the build has CUDA): dispatch is at compile time, with no virtual call per op.
//
//   template <typename B> void layer_forward(...);     // in a .cpp, written against B::Act, B::Exec and B's ops
//   #define INSTANTIATE(B) template void layer_forward<B>(...);
//   HONE_FOR_EACH_BACKEND(INSTANTIATE)
#pragma once

#include "backend/cpu_backend.h"
#include "backend/cuda_backend.h"

#if HONE_CUDA
#define HONE_FOR_EACH_BACKEND(X) X(::hone::CpuBackend) X(::hone::CudaBackend)
#define HONE_HAS_CUDA_BACKEND 1
#else
#define HONE_FOR_EACH_BACKEND(X) X(::hone::CpuBackend)
#define HONE_HAS_CUDA_BACKEND 0
#endif
