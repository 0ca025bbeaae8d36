// The polling wait of the MPI watchdog and its timeout message (see the header).
#include "runtime/mpi_watchdog.h"

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>

#include "runtime/error.h"
#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<double> g_timeout{kDefaultCollectiveTimeoutSeconds};

std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}
CollectiveTimeoutHandler& handler() {
  static CollectiveTimeoutHandler h;
  return h;
}

// Spins for the first polls (a collective between busy ranks completes in microseconds), then yields the core
// (ranks may share cores: mpirun --oversubscribe), then sleeps so that a long wait costs no CPU.
void pause(int polls, double waited_s) {
  if (polls < 64) return;
  if (waited_s < 0.002) {
    sched_yield();
    return;
  }
  const timespec t{0, waited_s < 0.1 ? 50000L : 1000000L};  // 50 us, then 1 ms
  nanosleep(&t, nullptr);
}

}  // namespace

void set_collective_timeout(double seconds) {
  HONE_CHECK(seconds > 0, "the collective timeout must be positive, not ", seconds);
  g_timeout.store(seconds);
}

double collective_timeout() { return g_timeout.load(); }

CollectiveTimeoutHandler set_collective_timeout_handler(CollectiveTimeoutHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  std::swap(handler(), h);
  return h;
}

void mpi_wait_all(int n, MPI_Request* requests, const std::function<std::string()>& what) {
  const Clock::time_point start = Clock::now();
  const double timeout = collective_timeout();
  bool timed_out = false;
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_CHECK(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (!timed_out && waited > timeout) {
      timed_out = true;
      const std::string message =
          cat("MPI ", what(), " did not complete within ", timeout,
              " s (parallel.collective_timeout_s): a rank of the group stopped answering or is far behind");
      CollectiveTimeoutHandler h;
      {
        std::lock_guard<std::mutex> lock(handler_mutex());
        h = handler();
      }
      // fatal_exit does not return: the requests and their buffers stay as they are while every rank ends.
      if (!h) fatal_exit(kExitFailure, message, /*collective=*/false);
      h(message);
    }
    pause(polls, waited);
  }
}

}  // namespace hone
