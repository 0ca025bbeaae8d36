// Rank grid arithmetic: tp innermost, then cp, then dp, then pp; the expert groups carved out of cp x dp; group lists; errors for impossible layouts.
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

// tp 2 x cp 2 x dp 2 x pp 1 with ep 2: r = tp + 2 (cp + 2 dp).
BOOST_AUTO_TEST_CASE(context_and_expert_groups) {
  const RankGrid g(8, 2, 1, /*cp=*/2, /*ep=*/2);
  BOOST_TEST(g.dp() == 2);
  BOOST_TEST(g.edp() == 2);
  BOOST_TEST((g.coord(5) == RankCoord{1, 1, 0, 0}));
  BOOST_TEST((g.coord(3) == RankCoord{0, 1, 0, 1}));
  BOOST_TEST(g.cp_group(5) == (std::vector<int>{5, 7}));
  BOOST_TEST(g.dp_group(5) == (std::vector<int>{1, 5}));
  BOOST_TEST(g.group(hone::GridGroup::dp_cp, 5) == (std::vector<int>{1, 3, 5, 7}));
  // j = cp + 2 dp: rank 5 has j = 2, so ep group {j 2, 3} and edp group {j 0, 2}.
  BOOST_TEST(g.group(hone::GridGroup::ep, 5) == (std::vector<int>{5, 7}));
  BOOST_TEST(g.group(hone::GridGroup::edp, 5) == (std::vector<int>{1, 5}));
  BOOST_TEST(g.ep_rank(5) == 0);
  BOOST_TEST(g.edp_rank(5) == 1);
  BOOST_CHECK_THROW(RankGrid(8, 2, 1, 2, 3), hone::UserError);  // 3 does not divide cp x dp = 4
  BOOST_CHECK_THROW(RankGrid(8, 2, 1, 3, 1), hone::UserError);  // 8 ranks, tp x cp = 6
}

// Every kind of group partitions the world, its members agree on the coordinates it does not span, and the index
// of a rank in its group list is group_rank.
BOOST_AUTO_TEST_CASE(every_group_kind_partitions_the_world) {
  const int layouts[][5] = {{1, 1, 1, 1, 1}, {8, 2, 1, 2, 2}, {8, 1, 2, 2, 4}, {16, 2, 2, 2, 2}, {12, 1, 1, 3, 2},
                            {24, 2, 1, 3, 6}, {16, 1, 1, 1, 8}};
  const hone::GridGroup kinds[] = {hone::GridGroup::tp, hone::GridGroup::cp, hone::GridGroup::dp, hone::GridGroup::pp,
                                   hone::GridGroup::dp_cp, hone::GridGroup::ep, hone::GridGroup::edp};
  for (const auto& l : layouts) {
    const RankGrid g(l[0], l[1], l[2], l[3], l[4]);
    BOOST_TEST_CONTEXT("world " << l[0] << " tp " << l[1] << " pp " << l[2] << " cp " << l[3] << " ep " << l[4]) {
      BOOST_TEST(g.dp() * g.tp() * g.pp() * g.cp() == g.world_size());
      BOOST_TEST(g.ep() * g.edp() == g.cp() * g.dp());
      for (const auto k : kinds) {
        std::set<std::vector<int>> groups;
        std::set<int> ids;
        for (int r = 0; r < g.world_size(); ++r) {
          const auto members = g.group(k, r);
          BOOST_TEST(static_cast<int>(members.size()) == g.group_size(k));
          BOOST_TEST(members[static_cast<size_t>(g.group_rank(k, r))] == r);
          const RankCoord c = g.coord(r);
          for (size_t i = 0; i < members.size(); ++i) {
            const int m = members[i];
            const RankCoord cm = g.coord(m);
            BOOST_TEST(g.group_id(k, m) == g.group_id(k, r));
            BOOST_TEST(g.group_rank(k, m) == static_cast<int>(i));
            BOOST_TEST((cm.tp == c.tp || k == hone::GridGroup::tp));  // only tp groups span tp
            BOOST_TEST((cm.pp == c.pp || k == hone::GridGroup::pp));
          }
          groups.insert(members);
          ids.insert(g.group_id(k, r));
        }
        BOOST_TEST(static_cast<int>(groups.size()) * g.group_size(k) == g.world_size());
        BOOST_TEST(ids.size() == groups.size());
        BOOST_TEST(*ids.rbegin() == static_cast<int>(ids.size()) - 1);  // dense ids
      }
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
