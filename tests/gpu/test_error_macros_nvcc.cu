// cuda/check.h compiled by nvcc: CUDA_CHECK_LAST after a launch that cannot start (too many threads per block,
// or no device at all). Plain: no Boost here; tests/gpu/test_error_macros.cpp checks the message.
#include <string>

#include "cuda/check.h"

namespace {
__global__ void noop() {}
}  // namespace

std::string cuda_check_last_after_bad_launch(int* line) {
  try {
    noop<<<1, 1 << 20>>>();
    *line = __LINE__ + 1;
    CUDA_CHECK_LAST();
  } catch (const hone::Error& e) {
    return e.what();
  }
  return "no exception";
}
