// Stop-signal handling for tests/unit/test_runtime_signals.cpp.
//   stop_signal once   installs the handlers, raises SIGUSR1, reports what it saw and exits 3 (interrupted)
//   stop_signal twice  raises SIGTERM twice: the second one ends the process (killed by SIGTERM)
//   stop_signal rank1  only rank 1 raises SIGUSR1; every rank reports whether any rank was asked to stop
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
    std::printf("rank %d before: %d\n", rank, hone::stop_requested() ? 1 : 0);
    hone::install_stop_handlers();
    if (mode != "rank1" || rank == 1) std::raise(mode == "twice" ? SIGTERM : SIGUSR1);
    const bool any = hone::stop_requested_on_any_rank();
    std::printf("rank %d after: %d signal %d any rank: %d\n", rank, hone::stop_requested() ? 1 : 0,
                hone::stop_signal(), any ? 1 : 0);
    std::fflush(stdout);
    if (mode == "twice") {
      std::raise(SIGTERM);
      std::printf("still running after the second signal\n");
      return 0;
    }
    return any ? static_cast<int>(hone::kExitInterrupted) : 0;
  });
}
