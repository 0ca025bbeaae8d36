// test::gpu_count and the needs_gpu precondition.
#include "common/gpu.h"

#if HONE_CUDA
#include <cuda_runtime.h>
#endif

namespace test {

int gpu_count() {
#if HONE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

boost::test_tools::assertion_result needs_gpu(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(gpu_count() > 0);
  if (!r) r.message() << (HONE_CUDA ? "skipped: no CUDA device" : "skipped: CPU-only build (CUDA=0)");
  return r;
}

}  // namespace test
