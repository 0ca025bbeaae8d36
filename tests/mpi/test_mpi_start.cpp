// MPI starts and stops under two ranks, and the ranks see each other.
#include <boost/test/unit_test.hpp>
#include <mpi.h>

#include "runtime/runtime.h"

BOOST_AUTO_TEST_CASE(two_ranks_see_each_other) {
  BOOST_TEST(hone::world_size() == 2);
  int mine = hone::world_rank() + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  BOOST_TEST(sum == 3);
}
