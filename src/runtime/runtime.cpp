// MPI start/stop and the fatal-error path shared by every command.
#include "runtime/runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

namespace hone {

static bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

Runtime::Runtime(int* argc, char*** argv) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  }
}

Runtime::~Runtime() {
  if (mpi_active()) MPI_Finalize();
}

int world_rank() {
  int r = 0;
  if (mpi_active()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  if (mpi_active()) MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

void fatal_exit(int exit_code, const std::string& message, bool collective) {
  const int rank = world_rank(), size = world_size();
  std::fflush(stdout);
  if (size <= 1 || collective) {
    if (rank == 0) std::fprintf(stderr, "hone: error: %s\n", message.c_str());
    std::fflush(stderr);
    if (mpi_active()) MPI_Finalize();
    std::exit(exit_code);
  }
  std::fprintf(stderr, "[rank %d] hone: error: %s\n", rank, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace hone
