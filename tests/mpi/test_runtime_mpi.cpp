// The runtime under two ranks: node-local places, grid sub-communicators, MPI_CHECK on a failing call, agree().
#include <boost/test/unit_test.hpp>
#include <mpi.h>

#include <string>
#include <vector>

#include "runtime/agree.h"
#include "runtime/grid_comms.h"
#include "runtime/mpi_check.h"
#include "runtime/rank_grid.h"
#include "runtime/runtime.h"
#include "runtime/signals.h"

BOOST_AUTO_TEST_SUITE(runtime_mpi)

BOOST_AUTO_TEST_CASE(local_rank_and_size_on_one_node) {
  BOOST_TEST(hone::mpi_active());
  BOOST_TEST(hone::local_size() == 2);  // mpirun -np 2 on this one machine
  BOOST_TEST(hone::local_rank() == hone::world_rank());
}

BOOST_AUTO_TEST_CASE(grid_comms_follow_the_group_lists) {
  const int rank = hone::world_rank();
  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{2, 1}, {1, 1}, {1, 2}}) {
    BOOST_TEST_CONTEXT("tp " << tp << " pp " << pp) {
      const hone::RankGrid grid(hone::world_size(), tp, pp);
      const hone::GridComms comms(grid);
      const std::pair<MPI_Comm, std::vector<int>> kinds[] = {
          {comms.tp(), grid.tp_group(rank)}, {comms.dp(), grid.dp_group(rank)}, {comms.pp(), grid.pp_group(rank)}};
      for (const auto& [comm, group] : kinds) {
        int size = 0, sub_rank = -1;
        MPI_CHECK(MPI_Comm_size(comm, &size));
        MPI_CHECK(MPI_Comm_rank(comm, &sub_rank));
        BOOST_TEST(size == static_cast<int>(group.size()));
        BOOST_TEST(group[static_cast<size_t>(sub_rank)] == rank);
        std::vector<int> members(static_cast<size_t>(size));  // who is really in the communicator
        MPI_CHECK(MPI_Allgather(&rank, 1, MPI_INT, members.data(), 1, MPI_INT, comm));
        BOOST_TEST(members == group);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(mpi_check_names_the_call_the_mpi_error_file_and_line) {
  int x = 0, line = 0;
  std::string msg;
  try {
    line = __LINE__ + 1;
    MPI_CHECK(MPI_Send(&x, 1, MPI_INT, hone::world_size() + 7, 0, MPI_COMM_WORLD));
  } catch (const hone::Error& e) {
    msg = e.what();
  }
  BOOST_TEST_MESSAGE(msg);
  BOOST_TEST(msg.find("MPI_CHECK(MPI_Send(&x, 1, MPI_INT, hone::world_size() + 7, 0, MPI_COMM_WORLD)) failed: ") == 0u);
  BOOST_TEST(msg.find("MPI_ERR_RANK") != std::string::npos);  // from MPI_Error_string
  BOOST_TEST(msg.find(" at " + std::string(__FILE__) + ":" + std::to_string(line)) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(agree_passes_when_every_rank_is_ok) {
  BOOST_CHECK_NO_THROW(hone::agree(true, "never"));
  BOOST_TEST(hone::agreed([] { return hone::world_rank() * 10; }) == hone::world_rank() * 10);
}

BOOST_AUTO_TEST_CASE(agree_throws_on_every_rank_when_one_fails) {
  const int rank = hone::world_rank();
  std::string msg;
  int code = -1;
  try {
    hone::agree(rank != 1, "rank 1 has no data", hone::kExitUserError);
  } catch (const hone::AgreedError& e) {
    msg = e.what(), code = e.exit_code();
  }
  BOOST_TEST(msg == "[rank 1] rank 1 has no data");
  BOOST_TEST(code == 2);
}

BOOST_AUTO_TEST_CASE(agreed_merges_identical_failures_and_keeps_the_worst_code) {
  const int rank = hone::world_rank();
  std::string msg;
  int code = -1;
  try {
    hone::agreed([&] {
      if (rank == 0) throw hone::Error("bad shape");
      throw hone::UserError("bad deck");
    });
  } catch (const hone::AgreedError& e) {
    msg = e.what(), code = e.exit_code();
  }
  BOOST_TEST(msg == "[rank 0] bad shape\n[rank 1] bad deck");
  BOOST_TEST(code == 1);
  try {
    hone::agreed([] { throw hone::UserError("same everywhere"); });
  } catch (const hone::AgreedError& e) {
    msg = e.what(), code = e.exit_code();
  }
  BOOST_TEST(msg == "same everywhere");
  BOOST_TEST(code == 2);
}

BOOST_AUTO_TEST_CASE(no_stop_requested_without_signals) { BOOST_TEST(!hone::stop_requested_on_any_rank()); }

BOOST_AUTO_TEST_SUITE_END()
