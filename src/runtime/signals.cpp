// Stop-signal handlers: async-signal-safe (a lock-free atomic store, signal(), raise()).
#include "runtime/signals.h"

#include <mpi.h>

#include <atomic>
#include <csignal>
#include <string>

#include "runtime/mpi_check.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/runtime.h"

namespace hone {

namespace {
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (!g_stop_signal.compare_exchange_strong(expected, sig) && expected == sig) {
    std::signal(sig, SIG_DFL);  // asked twice: stop now
    std::raise(sig);
  }
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);  // Ctrl-C stops at the next step with a checkpoint, like SIGTERM
}

bool stop_requested() { return g_stop_signal.load() != 0; }
int stop_signal() { return g_stop_signal.load(); }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

bool stop_requested_on_any_rank() {
  int mine = stop_requested() ? 1 : 0, any = mine;
  if (mpi_active() && world_size() > 1) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    mpi_wait(&req, [] {
      return cat("stop-signal check (all_reduce_max of 4 bytes) on the world group (world ranks 0-", world_size() - 1,
                 ")");
    });
  }
  return any != 0;
}

}  // namespace hone
