// Stop-signal handlers: async-signal-safe (a lock-free atomic store, signal(), raise()).
#include "runtime/signals.h"

#include <mpi.h>
#include <unistd.h>

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

// The line the first stop signal prints (rank 0 alone), made before any signal can come: a handler may only write().
struct Notice {
  std::string text;
};
Notice g_notice[3];  // SIGTERM, SIGUSR1, SIGINT
bool g_print_notice = false;

int notice_index(int sig) { return sig == SIGTERM ? 0 : sig == SIGUSR1 ? 1 : sig == SIGINT ? 2 : -1; }

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) {
    const int i = notice_index(sig);
    if (g_print_notice && i >= 0) {
      const std::string& t = g_notice[i].text;
      [[maybe_unused]] const ssize_t n = write(STDERR_FILENO, t.data(), t.size());
    }
  } else if (expected == sig) {
    std::signal(sig, SIG_DFL);  // asked twice: stop now
    std::raise(sig);
  }
}
}  // namespace

void install_stop_handlers() {
  for (int sig : {SIGTERM, SIGUSR1, SIGINT})
    g_notice[notice_index(sig)].text =
        std::string("hone: ") + stop_signal_name(sig) + " received: finishing the step in progress, then a checkpoint "
        "and exit code 3 (run.resume=auto continues); " + (sig == SIGINT ? "Ctrl-C" : stop_signal_name(sig)) +
        " again stops at once, without a checkpoint\n";
  g_print_notice = launcher_rank() == 0;
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
