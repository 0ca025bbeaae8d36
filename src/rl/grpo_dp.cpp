// The data-parallel collectives of the GRPO loop over the host Comm of the data-parallel group (see grpo_dp.h).
// With tp = pp = 1 that group is MPI_COMM_WORLD.
#include "rl/grpo_dp.h"

#include <memory>

#include "comm/host_collectives.h"
#include "comm/mpi_comm.h"
#include "runtime/runtime.h"

namespace hone::rl::dp {
namespace {

// Remade when MPI starts or stops (a process may run commands with and without MPI, e.g. the test suites).
MpiComm& comm() {
  static std::unique_ptr<MpiComm> c;
  static bool made_with_mpi = false;
  const bool active = mpi_active();
  if (!c || made_with_mpi != active) {
    c = std::make_unique<MpiComm>(active ? MPI_COMM_WORLD : MPI_COMM_NULL, "dp");
    made_with_mpi = active;
  }
  return *c;
}

}  // namespace

Comm& host_comm() { return comm(); }

int rank() { return comm().rank(); }
int size() { return comm().size(); }

void sum(float* x, int64_t n) { comm().all_reduce_sum(x, n); }
void sum(double* x, int64_t n) { comm().all_reduce_sum(x, n); }
void sum(int64_t* x, int64_t n) { comm().all_reduce_sum(x, n); }
void max(double* x, int64_t n) { comm().all_reduce_max(x, n); }
void min(double* x, int64_t n) { comm().all_reduce_min(x, n); }

std::vector<int64_t> all_gather(int64_t v) {
  std::vector<int64_t> all(size_t(size()), v);
  comm().all_gather(&v, all.data(), 1);
  return all;
}

std::string broadcast(const std::string& s) { return broadcast_string(comm(), s, 0); }

std::vector<std::string> gather_to_root(const std::string& s) { return gather_strings(comm(), s, 0); }

void barrier() { comm().barrier(); }

}  // namespace hone::rl::dp
