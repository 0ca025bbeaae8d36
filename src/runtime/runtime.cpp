// MPI start and stop, and this rank's place (world and node-local rank and size).
#include "runtime/runtime.h"

#include <mpi.h>

#include <atomic>
#include <cstdlib>

#include "runtime/mpi_check.h"
#include "runtime/mpi_state.h"

namespace hone {

namespace {
struct Places {
  std::atomic<bool> known{false};  // set once the Runtime has asked MPI
  int world_rank = 0, world_size = 1, local_rank = 0, local_size = 1;
  MPI_Comm error_comm = MPI_COMM_NULL;
};
Places& places() {
  static Places p;
  return p;
}
}  // namespace

bool mpi_active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

Runtime::Runtime(int* argc, char*** argv) {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    // Open MPI prints a 7-line banner on every MPI_Abort; our own message says what happened. Must be set before
    // MPI_Init (the parameter cannot be changed later); overwrite=0 keeps a user's OMPI_MCA_orte_execute_quiet=0.
    setenv("OMPI_MCA_orte_execute_quiet", "1", /*overwrite=*/0);
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw Error("MPI_Init_thread failed: MPI could not start");
  }
  MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  Places& p = places();
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &p.world_rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &p.world_size));
  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, p.world_rank, MPI_INFO_NULL, &node));
  MPI_CHECK(MPI_Comm_rank(node, &p.local_rank));
  MPI_CHECK(MPI_Comm_size(node, &p.local_size));
  MPI_CHECK(MPI_Comm_free(&node));
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &p.error_comm));
  p.known = true;
}

Runtime::~Runtime() {
  if (!mpi_active()) return;
  Places& p = places();
  if (p.error_comm != MPI_COMM_NULL) MPI_Comm_free(&p.error_comm);
  p.known = false;
  MPI_Finalize();
}

int world_rank() { return places().known ? places().world_rank : 0; }
int world_size() { return places().known ? places().world_size : 1; }
int local_rank() { return places().known ? places().local_rank : 0; }
int local_size() { return places().known ? places().local_size : 1; }

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(name);
    if (v && *v) return std::atoi(v);
  }
  return 0;
}

int launcher_local_size() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
    const char* v = std::getenv(name);
    if (v && *v && std::atoi(v) > 0) return std::atoi(v);
  }
  return 0;
}

namespace detail {
MPI_Comm error_comm() {
  const Places& p = places();
  return (p.known && p.error_comm != MPI_COMM_NULL) ? p.error_comm : MPI_COMM_WORLD;
}
}  // namespace detail

}  // namespace hone
