// Rank grid arithmetic: tp innermost, then dp, then pp; group lists; errors for impossible layouts.
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/rank_grid.h"

using hone::RankCoord;
using hone::RankGrid;

BOOST_AUTO_TEST_SUITE(runtime_rank_grid)

BOOST_AUTO_TEST_CASE(single_rank_is_all_zeros) {
  const RankGrid g(1, 1, 1);
  BOOST_TEST(g.dp() == 1);
  BOOST_TEST((g.coord(0) == RankCoord{0, 0, 0}));
  BOOST_TEST(g.tp_group(0) == std::vector<int>{0});
  BOOST_TEST(g.dp_group(0) == std::vector<int>{0});
  BOOST_TEST(g.pp_group(0) == std::vector<int>{0});
}

BOOST_AUTO_TEST_CASE(eight_ranks_tp2_pp2) {
  const RankGrid g(8, 2, 2);
  BOOST_TEST(g.dp() == 2);
  // r: tp = r%2, dp = (r/2)%2, pp = r/4
  BOOST_TEST((g.coord(0) == RankCoord{0, 0, 0}));
  BOOST_TEST((g.coord(1) == RankCoord{0, 1, 0}));
  BOOST_TEST((g.coord(2) == RankCoord{1, 0, 0}));
  BOOST_TEST((g.coord(5) == RankCoord{0, 1, 1}));
  BOOST_TEST((g.coord(7) == RankCoord{1, 1, 1}));
  BOOST_TEST(g.tp_group(5) == (std::vector<int>{4, 5}));
  BOOST_TEST(g.dp_group(5) == (std::vector<int>{5, 7}));
  BOOST_TEST(g.pp_group(5) == (std::vector<int>{1, 5}));
  BOOST_TEST(g.tp_group(2) == (std::vector<int>{2, 3}));
  BOOST_TEST(g.dp_group(2) == (std::vector<int>{0, 2}));
  BOOST_TEST(g.pp_group(2) == (std::vector<int>{2, 6}));
}

BOOST_AUTO_TEST_CASE(pure_data_parallel_and_pure_tensor_parallel) {
  const RankGrid dp4(4, 1, 1);
  BOOST_TEST(dp4.dp() == 4);
  BOOST_TEST(dp4.dp_group(2) == (std::vector<int>{0, 1, 2, 3}));
  BOOST_TEST(dp4.tp_group(2) == std::vector<int>{2});
  const RankGrid tp4(4, 4, 1);
  BOOST_TEST(tp4.dp() == 1);
  BOOST_TEST(tp4.tp_group(3) == (std::vector<int>{0, 1, 2, 3}));
  BOOST_TEST(tp4.dp_group(3) == std::vector<int>{3});
  const RankGrid pp3(6, 1, 3);
  BOOST_TEST(pp3.dp() == 2);
  BOOST_TEST(pp3.pp_group(1) == (std::vector<int>{1, 3, 5}));
  BOOST_TEST(pp3.dp_group(3) == (std::vector<int>{2, 3}));
}

// For several layouts: coord and rank are inverses, and every group kind partitions the world into groups of the
// right size whose members agree on the other two coordinates, with ids that match the group lists.
BOOST_AUTO_TEST_CASE(groups_partition_the_world_for_many_layouts) {
  const int layouts[][3] = {{1, 1, 1}, {2, 2, 1}, {2, 1, 2}, {6, 2, 1}, {6, 3, 2}, {12, 2, 3}, {16, 4, 2}, {24, 2, 2}};
  for (const auto& l : layouts) {
    const RankGrid g(l[0], l[1], l[2]);
    BOOST_TEST_CONTEXT("world " << l[0] << " tp " << l[1] << " pp " << l[2]) {
      BOOST_TEST(g.dp() * g.tp() * g.pp() == g.world_size());
      std::set<std::vector<int>> tp_groups, dp_groups, pp_groups;
      for (int r = 0; r < g.world_size(); ++r) {
        const RankCoord c = g.coord(r);
        BOOST_TEST(g.rank(c) == r);
        BOOST_TEST(c.tp == r % g.tp());
        BOOST_TEST(c.dp == (r / g.tp()) % g.dp());
        BOOST_TEST(c.pp == r / (g.tp() * g.dp()));
        const auto tp = g.tp_group(r), dp = g.dp_group(r), pp = g.pp_group(r);
        BOOST_TEST(static_cast<int>(tp.size()) == g.tp());
        BOOST_TEST(static_cast<int>(dp.size()) == g.dp());
        BOOST_TEST(static_cast<int>(pp.size()) == g.pp());
        BOOST_TEST(tp[static_cast<size_t>(c.tp)] == r);
        BOOST_TEST(dp[static_cast<size_t>(c.dp)] == r);
        BOOST_TEST(pp[static_cast<size_t>(c.pp)] == r);
        for (int m : tp) BOOST_TEST((g.coord(m).dp == c.dp && g.coord(m).pp == c.pp && g.tp_group_id(m) == g.tp_group_id(r)));
        for (int m : dp) BOOST_TEST((g.coord(m).tp == c.tp && g.coord(m).pp == c.pp && g.dp_group_id(m) == g.dp_group_id(r)));
        for (int m : pp) BOOST_TEST((g.coord(m).tp == c.tp && g.coord(m).dp == c.dp && g.pp_group_id(m) == g.pp_group_id(r)));
        tp_groups.insert(tp), dp_groups.insert(dp), pp_groups.insert(pp);
      }
      BOOST_TEST(static_cast<int>(tp_groups.size()) == g.dp() * g.pp());
      BOOST_TEST(static_cast<int>(dp_groups.size()) == g.tp() * g.pp());
      BOOST_TEST(static_cast<int>(pp_groups.size()) == g.tp() * g.dp());
    }
  }
}

BOOST_AUTO_TEST_CASE(indivisible_world_is_a_user_error_naming_the_keys) {
  try {
    RankGrid g(6, 4, 1);
    BOOST_FAIL("no error for 6 ranks with tp 4");
  } catch (const hone::UserError& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find("parallel.tp") != std::string::npos);
    BOOST_TEST(m.find("parallel.pp") != std::string::npos);
    BOOST_TEST(m.find("(6)") != std::string::npos);
    BOOST_TEST(m.find("4 * 1 = 4") != std::string::npos);
  }
  BOOST_CHECK_THROW(RankGrid(8, 3, 1), hone::UserError);
  BOOST_CHECK_THROW(RankGrid(8, 2, 3), hone::UserError);
  BOOST_CHECK_THROW(RankGrid(2, 4, 1), hone::UserError);
}

BOOST_AUTO_TEST_CASE(non_positive_sizes_are_user_errors) {
  BOOST_CHECK_THROW(RankGrid(4, 0, 1), hone::UserError);
  BOOST_CHECK_THROW(RankGrid(4, 1, -2), hone::UserError);
}

BOOST_AUTO_TEST_CASE(ranks_outside_the_grid_are_internal_errors) {
  const RankGrid g(4, 2, 1);
  BOOST_CHECK_THROW(g.coord(4), hone::Error);
  BOOST_CHECK_THROW(g.coord(-1), hone::Error);
  BOOST_CHECK_THROW(g.rank(RankCoord{2, 0, 0}), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
