// Fatal-error scenarios for tests/unit/test_runtime_fatal.cpp, run under `mpirun -np 2` (or alone as one rank).
// Every scenario runs through hone::run_guarded, the same path as every hone command.
//   fatal_error <scenario>
//     ok                   prints each rank's place and exits 0
//     one-rank-error       rank 1 throws hone::Error while rank 0 waits in MPI_Barrier   (abort, exit 1)
//     one-rank-user-error  the same with a hone::UserError                                (abort, exit 2)
//     all-ranks-user-error every rank throws the same UserError                           (clean exit 2)
//     all-ranks-different  every rank throws a different Error                            (clean exit 1)
//     agreed-one-rank      rank 1 fails inside hone::agreed, rank 0 passes                (clean exit 2)
//     peer-stops           rank 1 stops itself (SIGSTOP, as kill -STOP) between two all-reduces; rank 0's MPI
//                          watchdog (timeout 1 s) ends every rank                           (abort, exit 1)
//     peer-stops-agree     the same inside hone::agreed (the agreement's own all-reduce)   (abort, exit 1)
//     background-cause     a thread of every rank notes a failure, then the main thread throws another error
//                          (as after an aborted collective): the noted one is reported    (clean exit 1)
//     background-stuck     a thread of rank 1 notes a failure while its main thread never ends and rank 0 waits
//                          in MPI_Barrier: rank 1 reports it alone after the grace         (exit 1)
#include <mpi.h>

#include <csignal>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "comm/mpi_comm.h"

#include "runtime/agree.h"
#include "runtime/error.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/runtime.h"

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  return hone::run_guarded(true, &argc, &argv, [&]() -> int {
    const int rank = hone::world_rank();
    if (scenario == "ok") {
      std::printf("rank %d of %d, local rank %d of %d\n", rank, hone::world_size(), hone::local_rank(),
                  hone::local_size());
      return 0;
    }
    if (scenario == "one-rank-error" || scenario == "one-rank-user-error") {
      if (rank == 1) {
        if (scenario == "one-rank-error") throw hone::Error("rank 1 lost its device (test)");
        throw hone::UserError("rank 1 cannot read shard 1 (test)");
      }
      MPI_Barrier(MPI_COMM_WORLD);  // never completes: rank 1 does not come
      std::printf("rank %d passed the barrier\n", rank);
      return 0;
    }
    if (scenario == "all-ranks-user-error") throw hone::UserError("deck.toml:3:1: unknown key 'foo' (test)");
    if (scenario == "all-ranks-different") throw hone::Error(hone::cat("rank ", rank, " failed its own way (test)"));
    if (scenario == "agreed-one-rank") {
      hone::agreed([&] {
        if (rank == 1) throw hone::UserError("missing input file (test)");
      });
      std::printf("rank %d passed the agreement\n", rank);
      return 0;
    }
    if (scenario == "peer-stops" || scenario == "peer-stops-agree") {
      hone::set_collective_timeout(1.0);
      hone::MpiComm world(MPI_COMM_WORLD, "world");
      float x = 1;
      world.all_reduce_sum(&x, 1);
      if (rank == 1) std::raise(SIGSTOP);
      if (scenario == "peer-stops")
        world.all_reduce_sum(&x, 1);
      else
        hone::agreed([] {});
      std::printf("rank %d passed the collective\n", rank);
      return 0;
    }
    if (scenario == "background-cause") {
      std::thread watchdog([] { hone::background_failure(1, "NCCL all_reduce_sum timed out (test)", 30.0); });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the failure is noted first
      watchdog.detach();  // it returns once this thread reaches fatal_exit
      throw hone::Error("non-finite values after the abort (test)");
    }
    if (scenario == "background-stuck") {
      if (rank == 1) {
        std::thread([] { hone::background_failure(1, "NCCL all_gather timed out (test)", 1.0); }).detach();
        std::this_thread::sleep_for(std::chrono::seconds(50));  // a device wait that never ends
      }
      MPI_Barrier(MPI_COMM_WORLD);
      std::printf("rank %d passed the barrier\n", rank);
      return 0;
    }
    throw hone::UserError(hone::cat("unknown scenario '", scenario, "'"));
  });
}
