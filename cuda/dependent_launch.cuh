// Programmatic dependent launch (Hopper) for the small kernels of a decode step. A decode step of 512 rows runs a
// dozen kernels a layer that each move about a megabyte; between two of them the GPU drains the first grid, then
// launches and dispatches the second. Launched with launch_dependent, a kernel's blocks may become resident while
// the kernel before it still runs, and wait for it inside (dependent_wait, the first statement of every such kernel:
// nothing is read or written before the previous grid has finished and its memory is visible). Each such kernel also
// lets the next one launch as soon as all its own blocks have started.
// A kernel launched the ordinary way makes dependent_wait a no-op, so the same kernels serve every path. Included
// by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.h"

namespace hone::cuda {

// The first statement of a kernel that launch_dependent starts: wait for the grid before it, then let the next
// dependent grid launch.
__device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

// Programmatic dependent launch is a feature of compute capability 9.0 and newer (H100, B200): on an older GPU
// (A100, L40S: the bundle's sm_80 ... sm_89, where dependent_wait is compiled to nothing) the kernels launch the
// ordinary way. Asked per launch of the calling thread's current device, answered from a cache.
inline bool dependent_launch_runs() {
  thread_local int cached_device = -1;
  thread_local bool runs = false;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    int major = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    runs = major >= 9;
    cached_device = device;
  }
  return runs;
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization: the kernel may start
// before the previous work on the stream completes, so it must begin with dependent_wait(). The ordinary launch
// where the GPU has no such thing.
template <typename... Params, typename... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = dependent_launch_runs() ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace hone::cuda
