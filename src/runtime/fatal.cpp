// The fatal-error path shared by every command: one message, one exit code, every rank ends, no hang.
// How a rank tells "everyone failed here" (print once, exit cleanly) from "I alone failed" (abort everyone):
// it waits a short grace time in a barrier on a communicator used only here; all ranks arriving means all failed.
#include <mpi.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "runtime/activity.h"
#include "runtime/agree.h"
#include "runtime/log.h"
#include "runtime/mpi_state.h"
#include "runtime/runtime.h"

namespace hone {

namespace {

constexpr double kDefaultGraceSeconds = 3.0;

double grace_seconds() {
  const char* v = std::getenv("HONE_ERROR_GRACE_S");
  if (!v || !*v) return kDefaultGraceSeconds;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return (end && *end == '\0' && s >= 0) ? s : kDefaultGraceSeconds;
}

// One write, so lines of different ranks do not interleave mid-line. Continuation lines are printed as they are.
void print_error(const std::string& prefix, const std::string& message) {
  const std::string line = prefix + "hone: error: " + message + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

// True when every rank of comm entered the barrier within `seconds`.
bool all_ranks_arrive(MPI_Comm comm, double seconds) {
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(comm, &req) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    const timespec pause{0, 1000000};  // 1 ms
    nanosleep(&pause, nullptr);
  }
}

// A failure noted by another thread (background_failure), and whether the main thread has reached fatal_exit.
struct BackgroundFailure {
  std::mutex mutex;
  std::optional<std::string> message;
  std::atomic<bool> main_exiting{false};
};
BackgroundFailure& background() {
  static BackgroundFailure b;
  return b;
}

}  // namespace

void background_failure(int exit_code, const std::string& message, double grace_s) {
  BackgroundFailure& b = background();
  {
    std::lock_guard<std::mutex> lock(b.mutex);
    if (!b.message) b.message = message;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (!b.main_exiting.load()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fflush(stdout);
      print_error(world_size() > 1 ? cat("[rank ", world_rank(), "] ") : std::string(), message);
      std::_Exit(exit_code);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void fatal_exit(int exit_code, const std::string& reported, bool collective) {
  std::fflush(stdout);
  std::string message = reported;
  {
    BackgroundFailure& b = background();
    std::lock_guard<std::mutex> lock(b.mutex);
    b.main_exiting = true;
    if (b.message) message = *b.message;  // the cause, found by another thread
  }
  if (!mpi_active() || world_size() <= 1) {
    print_error("", message);
    std::exit(exit_code);
  }
  const int rank = world_rank(), size = world_size();
  bool printed = false;
  if (collective && rank == 0) {
    print_error("", message);
    printed = true;
  }
  MPI_Comm comm = detail::error_comm();
  if (all_ranks_arrive(comm, grace_seconds())) {
    // Every rank is here and responsive: share the messages, print them once, leave MPI cleanly.
    int worst = exit_code;  // the most serious: 1 (internal) before 2 (user) before 3 (interrupted)
    bool shared = MPI_Allreduce(&exit_code, &worst, 1, MPI_INT, MPI_MIN, comm) == MPI_SUCCESS;
    std::vector<std::string> messages;
    if (shared) shared = detail::allgather_strings(comm, message, &messages);
    if (shared) {
      if (rank == 0 && !printed) {
        std::vector<int> ranks(static_cast<size_t>(size));
        for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
        print_error("", detail::merge_rank_messages(ranks, messages, size));
      }
      MPI_Finalize();
      std::exit(worst);
    }
  }
  // This rank failed alone (or the others stopped answering): say so, then end every rank.
  if (!printed) print_error(cat("[rank ", rank, "] "), message);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

int run_guarded(bool uses_mpi, int* argc, char*** argv, const std::function<int()>& body) {
  std::optional<Runtime> runtime;  // outside the try: unwinding must not finalize MPI before fatal_exit
  try {
    if (uses_mpi) runtime.emplace(argc, argv);
    configure_logging_from_env();
    return body();
  } catch (const AgreedError& e) {
    fatal_exit(e.exit_code(), e.what(), /*collective=*/true);
  } catch (const UserError& e) {
    fatal_exit(kExitUserError, e.what(), /*collective=*/false);
  } catch (const std::exception& e) {
    const std::string resource = resource_failure_message(e);
    if (!resource.empty()) fatal_exit(kExitUserError, resource, /*collective=*/false);
    fatal_exit(kExitFailure, e.what(), /*collective=*/false);
  } catch (...) {
    fatal_exit(kExitFailure, "unknown exception", /*collective=*/false);
  }
}

namespace detail {

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string merge_rank_messages(const std::vector<int>& ranks, const std::vector<std::string>& messages,
                                int world_size) {
  std::vector<std::string> distinct;
  std::vector<std::vector<int>> holders;
  for (size_t i = 0; i < messages.size() && i < ranks.size(); ++i) {
    size_t k = 0;
    while (k < distinct.size() && distinct[k] != messages[i]) ++k;
    if (k == distinct.size()) {
      distinct.push_back(messages[i]);
      holders.emplace_back();
    }
    holders[k].push_back(ranks[i]);
  }
  std::string out;
  for (size_t k = 0; k < distinct.size(); ++k) {
    if (!out.empty()) out += "\n";
    const auto& h = holders[k];
    if (static_cast<int>(h.size()) != world_size)
      out += (h.size() == 1 ? "[rank " : "[ranks ") + rank_ranges(h) + "] ";
    out += distinct[k];
  }
  return out;
}

}  // namespace detail

}  // namespace hone
