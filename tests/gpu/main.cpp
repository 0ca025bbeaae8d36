// The GPU suite's entry point (make test-gpu). Cases guard themselves with test::needs_gpu() and are
// reported as skipped on a machine without a GPU.
#define BOOST_TEST_MODULE hone_gpu
#include <boost/test/unit_test.hpp>
