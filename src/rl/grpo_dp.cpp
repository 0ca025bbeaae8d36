// MPI behind the data-parallel collectives of the GRPO loop (see grpo_dp.h).
#include "rl/grpo_dp.h"

#include <mpi.h>

#include <algorithm>

#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone::rl::dp {
namespace {

bool distributed() { return mpi_active() && world_size() > 1; }

// MPI counts are int: reduce long buffers in pieces.
template <typename T>
void reduce(T* x, int64_t n, MPI_Datatype type, MPI_Op op) {
  if (!distributed()) return;
  constexpr int64_t kChunk = int64_t(1) << 30;
  for (int64_t off = 0; off < n; off += kChunk) {
    const int count = static_cast<int>(std::min(kChunk, n - off));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, x + off, count, type, op, MPI_COMM_WORLD));
  }
}

}  // namespace

int rank() { return world_rank(); }
int size() { return world_size(); }

void sum(float* x, int64_t n) { reduce(x, n, MPI_FLOAT, MPI_SUM); }
void sum(double* x, int64_t n) { reduce(x, n, MPI_DOUBLE, MPI_SUM); }
void sum(int64_t* x, int64_t n) { reduce(x, n, MPI_INT64_T, MPI_SUM); }
void max(double* x, int64_t n) { reduce(x, n, MPI_DOUBLE, MPI_MAX); }
void min(double* x, int64_t n) { reduce(x, n, MPI_DOUBLE, MPI_MIN); }

std::vector<int64_t> all_gather(int64_t v) {
  std::vector<int64_t> all(size_t(size()), v);
  if (distributed()) MPI_CHECK(MPI_Allgather(&v, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, MPI_COMM_WORLD));
  return all;
}

std::string broadcast(const std::string& s) {
  if (!distributed()) return s;
  int64_t n = int64_t(s.size());
  MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD));
  std::string out = rank() == 0 ? s : std::string(size_t(n), '\0');
  if (n > 0) MPI_CHECK(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD));
  return out;
}

void barrier() {
  if (distributed()) MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
}

}  // namespace hone::rl::dp
