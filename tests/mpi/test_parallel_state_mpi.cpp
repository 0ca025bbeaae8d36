// ParallelState under two ranks: this rank's coordinates and its groups' communicators for every grid two ranks
// allow (dp 2; tp 2; pp 2), each group's members and ranks as the rank grid lists them, and a sum over each
// group that sees exactly its members.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "comm/parallel_state.h"
#include "runtime/error.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"

BOOST_AUTO_TEST_SUITE(parallel_state_mpi)

BOOST_AUTO_TEST_CASE(coordinates_and_groups_follow_the_rank_grid) {
  const int me = hone::world_rank();
  BOOST_REQUIRE_EQUAL(hone::world_size(), 2);
  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}}) {
    BOOST_TEST_CONTEXT("tp " << tp << " pp " << pp) {
      const hone::RankGrid grid(2, tp, pp);
      const hone::ParallelState ps(grid);
      BOOST_TEST(ps.world_rank() == me);
      BOOST_TEST(ps.world_size() == 2);
      BOOST_TEST((ps.coord() == grid.coord(me)));
      BOOST_TEST(ps.dp_size() == 2 / (tp * pp));
      BOOST_TEST(ps.tp_size() == tp);
      BOOST_TEST(ps.pp_size() == pp);
      BOOST_TEST(ps.dp_rank() == (tp == 1 && pp == 1 ? me : 0));
      BOOST_TEST(ps.tp_rank() == (tp == 2 ? me : 0));
      BOOST_TEST(ps.pp_rank() == (pp == 2 ? me : 0));
      BOOST_TEST(ps.cp_size() == 1);
      BOOST_TEST(ps.ep_size() == 1);
      const std::pair<hone::Comm*, std::vector<int>> groups[] = {{&ps.world(), {0, 1}},
                                                                  {&ps.dp(), grid.dp_group(me)},
                                                                  {&ps.tp(), grid.tp_group(me)},
                                                                  {&ps.pp(), grid.pp_group(me)}};
      for (const auto& [c, members] : groups) {
        BOOST_TEST_CONTEXT(c->name()) {
          BOOST_TEST(!c->on_device());
          BOOST_TEST(c->world_ranks() == members);
          BOOST_TEST(members[size_t(c->rank())] == me);
          int64_t who = int64_t(1) << me, all = 0;
          c->all_reduce_sum(&who, &all, 1);
          int64_t expect = 0;
          for (int r : members) expect |= int64_t(1) << r;
          BOOST_TEST(all == expect);
        }
      }
      BOOST_TEST(&ps.host(hone::CommGroup::dp) == &ps.dp());
      BOOST_TEST(&ps.host(hone::CommGroup::pp) == &ps.pp());
      BOOST_TEST(ps.describe() == hone::cat("2 ranks: dp ", 2 / (tp * pp), " x tp ", tp, " x pp ", pp));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
