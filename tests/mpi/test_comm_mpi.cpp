// MpiComm under two ranks: every collective (sums, max, min, all-to-all) and element type against hand-computed
// results, the in-place forms, the grid's sub-communicators, and the local (one-rank) group. Point-to-point
// messages, all_to_allv and the string helpers: test_comm_exchange_mpi.cpp.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "comm/comm_factory.h"
#include "comm/host_collectives.h"
#include "comm/mpi_comm.h"
#include "mpi/comm_test_values.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"
#include "tensor/dtype.h"

namespace {

// Rank r's value at index i: distinct per rank and index, exact in every type used, increasing with r (so the max
// over ranks is the last rank's, the min rank 0's).
double value(int r, int64_t i) { return double(r + 1) * 10.0 + double(i % 7) - 3.0; }
double summed(int ranks, int64_t i) {
  double s = 0;
  for (int r = 0; r < ranks; ++r) s += value(r, i);
  return s;
}

using test::make;
using test::read;

template <typename T>
void check_all_collectives(hone::Comm& c) {
  const int P = c.size(), me = c.rank();
  const int64_t m = 5, n = m * P;
  BOOST_TEST_CONTEXT(c.describe() << " " << hone::comm_type_name(hone::comm_type_of<T>())) {
    // all_reduce out of place and in place
    std::vector<T> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = make<T>(value(me, i));
    c.all_reduce_sum(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) BOOST_TEST(read(y[size_t(i)]) == summed(P, i));
    c.all_reduce_sum(x.data(), n);
    for (int64_t i = 0; i < n; ++i) BOOST_TEST(read(x[size_t(i)]) == summed(P, i));

    // reduce_scatter out of place and in place (recv = send + rank * m)
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = make<T>(value(me, i));
    std::vector<T> part(static_cast<size_t>(m));
    c.reduce_scatter_sum(x.data(), part.data(), m);
    for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(part[size_t(i)]) == summed(P, me * m + i));
    c.reduce_scatter_sum(x.data(), x.data() + me * m, m);
    for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(x[size_t(me * m + i)]) == summed(P, me * m + i));

    // all_gather out of place and in place
    std::vector<T> mine(static_cast<size_t>(m)), all(static_cast<size_t>(n));
    for (int64_t i = 0; i < m; ++i) mine[size_t(i)] = make<T>(value(me, i));
    c.all_gather(mine.data(), all.data(), m);
    for (int r = 0; r < P; ++r)
      for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(all[size_t(r * m + i)]) == value(r, i));
    std::vector<T> inplace(size_t(n), make<T>(-1.0));
    for (int64_t i = 0; i < m; ++i) inplace[size_t(me * m + i)] = make<T>(value(me, i));
    c.all_gather_in_place(inplace.data(), m);
    for (int r = 0; r < P; ++r)
      for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(inplace[size_t(r * m + i)]) == value(r, i));

    // max and min, out of place and in place
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = make<T>(value(me, i));
    c.all_reduce_max(x.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) BOOST_TEST(read(y[size_t(i)]) == value(P - 1, i));
    c.all_reduce_min(x.data(), n);
    for (int64_t i = 0; i < n; ++i) BOOST_TEST(read(x[size_t(i)]) == value(0, i));

    // all_to_all: block q of rank r's send (values tagged by r and q) lands as block r of rank q's recv
    auto tagged = [](int from, int to, int64_t i) { return double(from) * 16.0 + double(to) * 4.0 + double(i % 3); };
    for (int q = 0; q < P; ++q)
      for (int64_t i = 0; i < m; ++i) x[size_t(q * m + i)] = make<T>(tagged(me, q, i));
    c.all_to_all(x.data(), y.data(), m);
    for (int r = 0; r < P; ++r)
      for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(y[size_t(r * m + i)]) == tagged(r, me, i));

    // broadcast from the last rank
    std::vector<T> b(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) b[size_t(i)] = make<T>(value(me, i));
    c.broadcast(b.data(), m, P - 1);
    for (int64_t i = 0; i < m; ++i) BOOST_TEST(read(b[size_t(i)]) == value(P - 1, i));
    c.barrier();
  }
}

void check_every_type(hone::Comm& c) {
  check_all_collectives<float>(c);
  check_all_collectives<uint16_t>(c);
  check_all_collectives<double>(c);
  check_all_collectives<int64_t>(c);
  check_all_collectives<int32_t>(c);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_mpi)

BOOST_AUTO_TEST_CASE(world_collectives_of_every_type) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  BOOST_TEST(world.size() == hone::world_size());
  BOOST_TEST(world.rank() == hone::world_rank());
  BOOST_TEST(world.world_ranks() == (std::vector<int>{0, 1}));
  BOOST_TEST(world.describe() == "world group (world ranks 0-1)");
  check_every_type(world);
}

BOOST_AUTO_TEST_CASE(bf16_sum_of_two_ranks) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  // 256 + 2 = 258 is a bf16 value (spacing 2 at 256); the reduced bits must decode to it exactly.
  const float mine = world.rank() == 0 ? 256.f : 2.f;
  uint16_t h = hone::f32_to_bf16(mine);
  world.all_reduce_sum(&h, 1);
  BOOST_TEST(hone::bf16_to_f32(h) == 258.f);
}

BOOST_AUTO_TEST_CASE(grid_groups_from_the_factory) {
  const int me = hone::world_rank();
  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}}) {
    BOOST_TEST_CONTEXT("tp " << tp << " pp " << pp) {
      const hone::RankGrid grid(hone::world_size(), tp, pp);
      hone::CommFactory factory(grid);
      const std::pair<hone::CommGroup, std::vector<int>> groups[] = {
          {hone::CommGroup::world, {0, 1}},
          {hone::CommGroup::dp, grid.dp_group(me)},
          {hone::CommGroup::tp, grid.tp_group(me)},
          {hone::CommGroup::pp, grid.pp_group(me)}};
      for (const auto& [g, members] : groups) {
        const auto c = factory.host(g);
        BOOST_TEST(c->name() == hone::comm_group_name(g));
        BOOST_TEST(c->world_ranks() == members);
        BOOST_TEST(c->size() == int(members.size()));
        BOOST_TEST(members[size_t(c->rank())] == me);
        check_every_type(*c);
        // A sum over the group sees exactly its members.
        int64_t who = int64_t(1) << me, all = 0;
        c->all_reduce_sum(&who, &all, 1);
        int64_t expect = 0;
        for (int r : members) expect |= int64_t(1) << r;
        BOOST_TEST(all == expect);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_local_group_copies) {
  hone::MpiComm local;
  BOOST_TEST(local.size() == 1);
  BOOST_TEST(local.rank() == 0);
  check_every_type(local);
}

BOOST_AUTO_TEST_CASE(int32_sums_past_int16_and_bf16_max) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  int32_t x[2] = {world.rank() == 0 ? 2000000000 : 147483647, -7 * (world.rank() + 1)};
  world.all_reduce_sum(x, 2);
  BOOST_TEST(x[0] == 2147483647);  // INT32_MAX: no wider type in between
  BOOST_TEST(x[1] == -21);
  // bf16 max and min pick an input exactly (258 is a bf16 value, no rounding on the way).
  uint16_t h = hone::f32_to_bf16(world.rank() == 0 ? 258.f : -3.f), lo = h;
  world.all_reduce_max(&h, 1);
  world.all_reduce_min(&lo, 1);
  BOOST_TEST(hone::bf16_to_f32(h) == 258.f);
  BOOST_TEST(hone::bf16_to_f32(lo) == -3.f);
}

BOOST_AUTO_TEST_CASE(long_strings_broadcast_from_rank_zero) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  const std::string s = world.rank() == 0 ? std::string(100000, 'x') + "end" : "other";
  BOOST_TEST(hone::broadcast_string(world, s) == std::string(100000, 'x') + "end");
  double v = world.rank() == 0 ? -1.5 : 4.0;
  world.all_reduce_max(&v, 1);
  BOOST_TEST(v == 4.0);
  v = world.rank() == 0 ? -1.5 : 4.0;
  world.all_reduce_min(&v, 1);
  BOOST_TEST(v == -1.5);
}

BOOST_AUTO_TEST_SUITE_END()
