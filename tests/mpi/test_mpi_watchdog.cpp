// The MPI watchdog under two ranks: an operation that waits longer than the collective timeout for a late rank
// reports itself (operation, bytes, group); the test's handler observes the message and the wait goes on, so the
// operation still completes with the right result once the late rank arrives. (The default handler ends every
// rank: tests/unit/test_runtime_fatal.cpp runs that under mpirun.)
#include <boost/test/unit_test.hpp>
#include <mpi.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "comm/mpi_comm.h"
#include "runtime/agree.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/runtime.h"
#include "runtime/signals.h"

namespace {

// Sets a short timeout and a recording handler for one test; restores both after.
struct WatchdogProbe {
  std::vector<std::string> messages;
  double old_timeout = hone::collective_timeout();
  hone::CollectiveTimeoutHandler old_handler;
  explicit WatchdogProbe(double timeout_s) {
    hone::set_collective_timeout(timeout_s);
    old_handler = hone::set_collective_timeout_handler([this](const std::string& m) { messages.push_back(m); });
  }
  ~WatchdogProbe() {
    hone::set_collective_timeout(old_timeout);
    hone::set_collective_timeout_handler(old_handler);
  }
};

// Rank 1 arrives `late_s` after rank 0 at op (both ranks call it).
void late_on_rank_1(double late_s, const std::function<void()>& op) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (hone::world_rank() == 1) std::this_thread::sleep_for(std::chrono::duration<double>(late_s));
  op();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mpi_watchdog)

BOOST_AUTO_TEST_CASE(a_late_rank_is_reported_naming_the_operation_and_the_group) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  const int rank = world.rank();
  struct Case {
    std::string expect;  // in rank 0's message
    std::function<void()> op;
  };
  float x[4] = {1, 2, 3, 4};
  int64_t g[2] = {0, 0};
  const std::vector<Case> cases = {
      {"MPI all_reduce_sum of 16 bytes (4 x f32) on the world group (world ranks 0-1) did not complete within 0.2 s "
       "(parallel.collective_timeout_s)",
       [&] {
         world.all_reduce_sum(x, 4);
         BOOST_TEST(x[3] == 8.f);  // completed, with both ranks' values
       }},
      {"MPI all_gather of 16 bytes (2 x i64) on the world group",
       [&] { world.all_gather_in_place(g, 1); }},
      {"MPI barrier on the world group (world ranks 0-1) did not", [&] { world.barrier(); }},
      {"MPI recv from rank 1 of 4 bytes (1 x f32) on the world group",
       [&] {
         if (rank == 0) world.recv(x, 1, 1);
         else world.send(x, 1, 0);
       }},
      {"MPI send_recv to rank 1 and from rank 1 of 8 bytes (2 x f32) on the world group",
       [&] {
         float mine = float(rank), theirs = -1;
         world.send_recv(&mine, 1, 1 - rank, &theirs, 1, 1 - rank);
         BOOST_TEST(theirs == float(1 - rank));
       }},
      {"MPI agreement on errors (all_reduce_max of 8 bytes) on the world group (world ranks 0-1)", [] { hone::agree(true); }},
      {"MPI stop-signal check (all_reduce_max of 4 bytes) on the world group (world ranks 0-1)",
       [] { hone::stop_requested_on_any_rank(); }},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.expect) {
      WatchdogProbe probe(0.2);
      late_on_rank_1(0.5, c.op);
      if (rank == 0) {
        BOOST_TEST_MESSAGE((probe.messages.empty() ? std::string("(none)") : probe.messages[0]));
        BOOST_REQUIRE_EQUAL(probe.messages.size(), 1u);  // reported once; the wait went on
        BOOST_TEST(probe.messages[0].find(c.expect) != std::string::npos);
        BOOST_TEST(probe.messages[0].find("stopped answering or is far behind") != std::string::npos);
      } else {
        BOOST_TEST(probe.messages.empty());  // the late rank itself waited for nobody
      }
    }
  }
  g[rank] = 10 + rank;
  world.all_gather_in_place(g, 1);
  BOOST_TEST(g[0] == 10);
  BOOST_TEST(g[1] == 11);
}

BOOST_AUTO_TEST_CASE(operations_within_the_timeout_are_not_reported) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  WatchdogProbe probe(5.0);
  late_on_rank_1(0.1, [&] {
    double v = 1;
    world.all_reduce_sum(&v, 1);
    BOOST_TEST(v == 2.0);
  });
  BOOST_TEST(probe.messages.empty());
}

BOOST_AUTO_TEST_SUITE_END()
