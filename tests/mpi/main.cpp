// The MPI suite's entry point, run by make test under `mpirun -np 2`: MPI is started once for all cases.
#define BOOST_TEST_MODULE hone_mpi
#include <boost/test/unit_test.hpp>

#include "runtime/runtime.h"

namespace {
struct MpiFixture {
  MpiFixture() : runtime(&boost::unit_test::framework::master_test_suite().argc,
                         &boost::unit_test::framework::master_test_suite().argv) {}
  hone::Runtime runtime;
};
}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(MpiFixture);
