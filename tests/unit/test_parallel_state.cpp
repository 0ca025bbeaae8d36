// ParallelState without MPI: a one-rank grid gives local groups of one (collectives copy), and a grid of more
// ranks is refused. (Two ranks: tests/mpi/test_parallel_state_mpi.cpp.)
#include <boost/test/unit_test.hpp>

#include <vector>

#include "comm/host_collectives.h"
#include "comm/parallel_state.h"
#include "runtime/error.h"
#include "runtime/rank_grid.h"

BOOST_AUTO_TEST_SUITE(parallel_state)

BOOST_AUTO_TEST_CASE(one_rank_without_mpi) {
  const hone::ParallelState ps(hone::RankGrid(1, 1, 1));
  BOOST_TEST(ps.world_rank() == 0);
  BOOST_TEST(ps.world_size() == 1);
  BOOST_TEST((ps.coord() == hone::RankCoord{0, 0, 0}));
  BOOST_TEST(ps.dp_size() == 1);
  BOOST_TEST(ps.tp_size() == 1);
  BOOST_TEST(ps.pp_size() == 1);
  BOOST_TEST(ps.describe() == "1 rank: dp 1 x tp 1 x pp 1");
  for (hone::CommGroup g : {hone::CommGroup::world, hone::CommGroup::dp, hone::CommGroup::tp, hone::CommGroup::pp}) {
    hone::Comm& c = ps.host(g);
    BOOST_TEST(c.name() == hone::comm_group_name(g));
    BOOST_TEST(c.size() == 1);
    BOOST_TEST(c.rank() == 0);
  }
  BOOST_TEST(hone::all_reduce_sum_value(ps.dp(), int64_t(5)) == 5);
  BOOST_TEST(hone::all_gather_value(ps.dp(), 2.5) == (std::vector<double>{2.5}));
}

BOOST_AUTO_TEST_CASE(a_grid_of_several_ranks_needs_mpi) {
  BOOST_CHECK_THROW(hone::ParallelState(hone::RankGrid(2, 1, 1)), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
