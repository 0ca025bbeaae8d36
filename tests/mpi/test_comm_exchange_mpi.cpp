// MpiComm's point-to-point messages and uneven all-to-all under two ranks: send/recv in both directions (ordered by
// rank parity, past MPI's eager size so an unordered pair would wait for each other), send_recv exchanging both ways
// at once and with this rank itself, all_to_allv with uneven and empty blocks and gaps in both buffers, the checks
// that refuse bad arguments, and the one-value and string helpers of comm/host_collectives.h.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/host_collectives.h"
#include "comm/mpi_comm.h"
#include "mpi/comm_test_values.h"
#include "runtime/error.h"
#include "tensor/dtype.h"

namespace {

// 4 MB of f32: well past the eager limit of every MPI transport, so a blocking send waits for its receive.
constexpr int64_t kLarge = int64_t(1) << 20;

// The value rank `from` sends to rank `to` at index i: exact in f32, bf16 and the integer types.
double payload(int from, int to, int64_t i) { return double(from) * 100.0 + double(to) * 10.0 + double(i % 7); }

using test::make;
using test::read;

template <typename T>
std::vector<T> message(int from, int to, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = make<T>(payload(from, to, i));
  return v;
}

template <typename T>
bool is_message(const std::vector<T>& v, int from, int to) {
  for (size_t i = 0; i < v.size(); ++i)
    if (read(v[i]) != payload(from, to, int64_t(i))) return false;
  return true;
}

// Even ranks send to the next rank then receive from it; odd ranks the other way round: every send meets a
// posted receive.
template <typename T>
void check_send_recv(hone::Comm& c, int64_t n) {
  const int me = c.rank(), peer = me ^ 1;
  if (peer >= c.size()) return;
  BOOST_TEST_CONTEXT(hone::comm_type_name(hone::comm_type_of<T>()) << " x " << n) {
    const std::vector<T> out = message<T>(me, peer, n);
    std::vector<T> in(static_cast<size_t>(n));
    if (me % 2 == 0) {
      c.send(out.data(), n, peer);
      c.recv(in.data(), n, peer);
    } else {
      c.recv(in.data(), n, peer);
      c.send(out.data(), n, peer);
    }
    BOOST_TEST(is_message(in, peer, me));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(comm_exchange_mpi)

BOOST_AUTO_TEST_CASE(send_and_recv_both_ways_in_rank_order) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  BOOST_REQUIRE_EQUAL(world.size(), 2);
  check_send_recv<float>(world, 1000);
  check_send_recv<float>(world, kLarge);
  check_send_recv<uint16_t>(world, 1000);
  check_send_recv<double>(world, 1000);
  check_send_recv<int64_t>(world, 1000);
  check_send_recv<int32_t>(world, kLarge);
  // Several messages to one peer arrive in the order sent.
  const int peer = 1 - world.rank();
  std::vector<int32_t> a(3), b(5);
  if (world.rank() == 0) {
    const std::vector<int32_t> first{1, 2, 3}, second{4, 5, 6, 7, 8};
    world.send(first.data(), 3, peer);
    world.send(second.data(), 5, peer);
  } else {
    world.recv(a.data(), 3, peer);
    world.recv(b.data(), 5, peer);
    BOOST_TEST(a == (std::vector<int32_t>{1, 2, 3}));
    BOOST_TEST(b == (std::vector<int32_t>{4, 5, 6, 7, 8}));
  }
}

BOOST_AUTO_TEST_CASE(send_recv_exchanges_without_ordering_the_pair) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  const int me = world.rank(), peer = 1 - me;
  // Both ranks send first: blocking sends of this size would wait for each other.
  const std::vector<float> out = message<float>(me, peer, kLarge);
  std::vector<float> in(static_cast<size_t>(kLarge));
  world.send_recv(out.data(), kLarge, peer, in.data(), kLarge, peer);
  BOOST_TEST(is_message(in, peer, me));
  // Uneven: rank 0 sends 3 elements and receives 5; rank 1 the other way round.
  const int64_t ns = me == 0 ? 3 : 5, nr = me == 0 ? 5 : 3;
  const std::vector<int64_t> small = message<int64_t>(me, peer, ns);
  std::vector<int64_t> got(static_cast<size_t>(nr));
  world.send_recv(small.data(), ns, peer, got.data(), nr, peer);
  BOOST_TEST(is_message(got, peer, me));
  // To this rank itself.
  const std::vector<uint16_t> self = message<uint16_t>(me, me, 100);
  std::vector<uint16_t> back(100);
  world.send_recv(self.data(), 100, me, back.data(), 100, me);
  BOOST_TEST(is_message(back, me, me));
}

BOOST_AUTO_TEST_CASE(all_to_allv_with_uneven_and_empty_blocks) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  const int P = world.size(), me = world.rank();
  // Elements rank r sends to rank q: 2, 0 / 5, 3 for two ranks (rank 0 sends nothing to rank 1).
  auto count = [](int r, int q) { return int64_t((2 + 3 * r + 5 * q) % 7); };
  // Send blocks in rank order with one unused element before each; receive blocks in reverse rank order with two.
  const size_t np = static_cast<size_t>(P);
  std::vector<int64_t> sc(np), sd(np), rc(np), rd(np);
  int64_t at = 0;
  for (int q = 0; q < P; ++q) {
    sc[size_t(q)] = count(me, q);
    sd[size_t(q)] = at + 1;
    at += 1 + sc[size_t(q)];
  }
  const int64_t send_len = at;
  at = 0;
  for (int r = P - 1; r >= 0; --r) {
    rc[size_t(r)] = count(r, me);
    rd[size_t(r)] = at + 2;
    at += 2 + rc[size_t(r)];
  }
  const int64_t recv_len = at;
  for (int q = 0; q < P; ++q) BOOST_TEST_MESSAGE("rank " << me << " -> " << q << ": " << sc[size_t(q)]);
  BOOST_TEST(count(0, 1) == 0);  // an empty block is part of the test

  std::vector<double> send(size_t(send_len), -1.0), recv(size_t(recv_len), -9.0);
  for (int q = 0; q < P; ++q)
    for (int64_t i = 0; i < sc[size_t(q)]; ++i) send[size_t(sd[size_t(q)] + i)] = payload(me, q, i);
  world.all_to_allv(send.data(), sc, sd, recv.data(), rc, rd);
  std::vector<double> expect(size_t(recv_len), -9.0);  // the gaps untouched
  for (int r = 0; r < P; ++r)
    for (int64_t i = 0; i < rc[size_t(r)]; ++i) expect[size_t(rd[size_t(r)] + i)] = payload(r, me, i);
  BOOST_TEST(recv == expect, boost::test_tools::per_element());

  // The same exchange as int32 and bf16.
  std::vector<int32_t> s32(send.size()), r32(recv.size(), -9);
  std::vector<uint16_t> sbf(send.size()), rbf(recv.size(), hone::f32_to_bf16(-9.f));
  for (size_t i = 0; i < send.size(); ++i) s32[i] = int32_t(send[i]), sbf[i] = hone::f32_to_bf16(float(send[i]));
  world.all_to_allv(s32.data(), sc, sd, r32.data(), rc, rd);
  world.all_to_allv(sbf.data(), sc, sd, rbf.data(), rc, rd);
  for (size_t i = 0; i < recv.size(); ++i) {
    BOOST_TEST(double(r32[i]) == expect[i]);
    BOOST_TEST(double(hone::bf16_to_f32(rbf[i])) == expect[i]);
  }
}

BOOST_AUTO_TEST_CASE(a_local_group_exchanges_with_itself) {
  hone::MpiComm local;
  const std::vector<int32_t> a{1, 2, 3, 4};
  std::vector<int32_t> b(4, 0);
  local.send_recv(a.data(), 4, 0, b.data(), 4, 0);
  BOOST_TEST(b == a);
  std::vector<int32_t> c(6, 0);
  const std::vector<int64_t> sc{3}, sd{1}, rc{3}, rd{2};
  local.all_to_allv(a.data(), sc, sd, c.data(), rc, rd);
  BOOST_TEST(c == (std::vector<int32_t>{0, 0, 2, 3, 4, 0}));
  std::vector<int32_t> d(4, 0);
  local.all_to_all(a.data(), d.data(), 4);
  BOOST_TEST(d == a);
  BOOST_CHECK_THROW(local.send(a.data(), 4, 0), hone::Error);  // no other rank to send to
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_on_every_rank) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  std::vector<float> x(8, 1.f), y(8, 0.f);
  BOOST_CHECK_THROW(world.send(x.data(), 8, world.rank()), hone::Error);  // to itself: send_recv does that
  BOOST_CHECK_THROW(world.recv(y.data(), 8, 2), hone::Error);              // outside the group
  BOOST_CHECK_THROW(world.all_to_all(x.data(), x.data() + 2, 2), hone::Error);  // overlapping buffers
  const std::vector<int64_t> one{4}, two{2, 2}, displs{0, 2}, negative{-1, 2};
  BOOST_CHECK_THROW(world.all_to_allv(x.data(), one, one, y.data(), two, displs), hone::Error);
  BOOST_CHECK_THROW(world.all_to_allv(x.data(), two, negative, y.data(), two, displs), hone::Error);
  BOOST_CHECK_THROW(world.all_to_allv(x.data(), two, displs, x.data() + 1, two, displs), hone::Error);
  world.barrier();  // both ranks are still in step
}

BOOST_AUTO_TEST_CASE(values_and_strings_over_a_host_comm) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  const int me = world.rank();
  BOOST_TEST(hone::all_reduce_sum_value(world, int64_t(me + 1)) == 3);
  BOOST_TEST(hone::all_reduce_max_value(world, me == 0 ? 2.5 : -1.0) == 2.5);
  BOOST_TEST(hone::all_reduce_min_value(world, int32_t(10 - me)) == 9);
  BOOST_TEST(hone::all_gather_value(world, int64_t(7 * me)) == (std::vector<int64_t>{0, 7}));
  // Rank 1's string is broadcast (9 bytes: not a whole number of words).
  BOOST_TEST(hone::broadcast_string(world, me == 1 ? "from one!" : "", 1) == "from one!");
  // Gathered to rank 1: an empty string and one of 100003 bytes, in rank order.
  const std::string mine = me == 0 ? "" : std::string(100000, 'y') + "end";
  const std::vector<std::string> all = hone::gather_strings(world, mine, 1);
  if (me == 1) {
    BOOST_TEST(all == (std::vector<std::string>{"", std::string(100000, 'y') + "end"}));
  } else {
    BOOST_TEST(all.empty());
  }
  hone::MpiComm local;
  BOOST_TEST(hone::gather_strings(local, "alone") == (std::vector<std::string>{"alone"}));
  BOOST_TEST(hone::broadcast_string(local, "alone") == "alone");
}

BOOST_AUTO_TEST_SUITE_END()
