// GPU smoke check: the CUDA runtime sees a device when one is there.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

BOOST_AUTO_TEST_CASE(cuda_device_is_usable, *boost::unit_test::precondition(test::needs_gpu)) {
  BOOST_TEST(test::gpu_count() > 0);
}
