// Stop-signal handling for tests/unit/test_runtime_signals.cpp.
//   stop_signal once   installs the handlers, raises SIGUSR1, reports what it saw and exits 3 (interrupted)
//   stop_signal twice  raises SIGTERM twice: the second one ends the process (killed by SIGTERM)
//   stop_signal int    raises SIGINT (Ctrl-C) once: a graceful stop like SIGTERM (exit 3)
//   stop_signal int2   raises SIGINT twice: the second one ends the process (killed by SIGINT)
//   stop_signal rank1  only rank 1 raises SIGUSR1; every rank reports whether any rank was asked to stop
//   stop_signal wait   installs the handlers, prints "ready" (rank 0) and polls like a training loop until a
//                      signal arrives from outside (exit 3) or 30 s pass (exit 1)
#include <mpi.h>
#include <time.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/signals.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  return hone::run_guarded(true, &argc, &argv, [&] {
    const int rank = hone::world_rank();
    if (mode == "wait") {
      hone::install_stop_handlers();
      MPI_Barrier(MPI_COMM_WORLD);  // every rank has its handlers before anyone is signalled
      if (rank == 0) std::printf("ready\n");
      std::fflush(stdout);
      for (int step = 0; step < 3000; ++step) {
        if (hone::stop_requested_on_any_rank()) {
          std::printf("rank %d stopping at step %d (signal %d here)\n", rank, step, hone::stop_signal());
          return static_cast<int>(hone::kExitInterrupted);
        }
        const timespec pause{0, 10000000};  // a 10 ms "step"
        nanosleep(&pause, nullptr);
      }
      return static_cast<int>(hone::kExitFailure);
    }
    std::printf("rank %d before: %d\n", rank, hone::stop_requested() ? 1 : 0);
    hone::install_stop_handlers();
    const bool sigint = mode == "int" || mode == "int2";
    if (mode != "rank1" || rank == 1) std::raise(mode == "twice" ? SIGTERM : sigint ? SIGINT : SIGUSR1);
    const bool any = hone::stop_requested_on_any_rank();
    std::printf("rank %d after: %d signal %d any rank: %d\n", rank, hone::stop_requested() ? 1 : 0,
                hone::stop_signal(), any ? 1 : 0);
    std::fflush(stdout);
    if (mode == "twice" || mode == "int2") {
      std::raise(mode == "twice" ? SIGTERM : SIGINT);
      std::printf("still running after the second signal\n");
      return 0;
    }
    return any ? static_cast<int>(hone::kExitInterrupted) : 0;
  });
}
