// GPU presence for the GPU suite: cases use *boost::unit_test::precondition(test::needs_gpu) and are
// reported as skipped where no GPU (or no CUDA build) is available.
#pragma once

#include <boost/test/unit_test.hpp>

namespace test {
int gpu_count();  // 0 in a CPU-only build or without a usable device
boost::test_tools::assertion_result needs_gpu(boost::unit_test::test_unit_id);
}  // namespace test
