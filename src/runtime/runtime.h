// The process runtime: MPI start and stop, this rank's place among all ranks, and ending every rank on a fatal error.
// A plain `hone ...` without mpirun or srun is one rank (an MPI singleton when the command uses MPI).
// Plain header (no mpi.h): the MPI-facing parts are in runtime/mpi_check.h and runtime/grid_comms.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hone {

// Starts MPI on construction and stops it on destruction (each only when not already done elsewhere).
// Before MPI_Init it asks Open MPI not to print its own help banner on MPI_Abort (OMPI_MCA_orte_execute_quiet=1,
// unless the environment sets it); after, MPI_COMM_WORLD returns errors (for MPI_CHECK) instead of aborting, and
// the local (per node) rank and size are found with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED).
class Runtime {
 public:
  Runtime(int* argc, char*** argv);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
};

bool mpi_active();  // MPI initialized and not yet finalized

// This rank's place; 0 and 1 when MPI is not running (a command without MPI is one rank).
int world_rank();
int world_size();
int local_rank();  // rank among the ranks of this node (selects the GPU)
int local_size();  // ranks on this node

// The rank a launcher gave this process, from its environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
// SLURM_PROCID), for messages printed before or without MPI (e.g. a usage error printed once); 0 when none is set.
int launcher_rank();
// The ranks a launcher starts on this node, from its environment (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
// SLURM_NTASKS_PER_NODE); 0 when none is set.
int launcher_local_size();

// Runs a command's body the way every command runs: starts MPI when uses_mpi (and stops it after), reads the
// logging settings from the environment (runtime/log.h), and turns an exception into one message and an exit
// code (through fatal_exit; never returns then):
//   hone::AgreedError (runtime/agree.h)  collective: printed once by rank 0, every rank exits with its code
//   hone::UserError                      exit 2      } not known to be collective: see fatal_exit
//   any other exception                  exit 1      }
// Returns body's exit code.
int run_guarded(bool uses_mpi, int* argc, char*** argv, const std::function<int()>& body);

// Ends the run after an error: prints `message` once ("hone: error: ..."), then ends every rank with `exit_code`.
//   collective = true:  every rank reached this same error at the same point (e.g. an AgreedError); rank 0
//                       prints, every rank finalizes MPI and exits with exit_code.
//   collective = false: not known whether the other ranks fail too. This rank waits up to $HONE_ERROR_GRACE_S
//                       seconds (default 3) for every other rank to reach fatal_exit as well.
//                       All arrive (e.g. the same deck error seen everywhere): rank 0 prints the messages once
//                       (identical ones merged) and every rank exits cleanly with the most serious code (1 before 2).
//                       Not all arrive (this rank failed alone while the others compute or wait in a collective):
//                       it prints its message with a "[rank r] " prefix and MPI_Abort ends every rank with exit_code.
// With one rank (or no MPI) it prints and exits at once.
[[noreturn]] void fatal_exit(int exit_code, const std::string& message, bool collective);

// A fatal failure found on a thread other than the main one (the NCCL watchdog of a stream-ordered communicator),
// which may not end the run itself: MPI belongs to the main thread. The message is kept, and the main thread's
// fatal_exit reports it in place of the error the main thread ends with (most likely a consequence of it, such as
// values read after an aborted collective). Returns once the main thread has reached fatal_exit; if it has not
// within grace_s seconds (it may wait on the device for work that never ends), this rank prints the message with
// its "[rank r] " prefix and exits with exit_code alone (the launcher then ends the other ranks).
void background_failure(int exit_code, const std::string& message, double grace_s);

namespace detail {
// Merges per-rank error messages for printing once: identical messages become one line, prefixed with the ranks
// that had it ("[ranks 1-3,5] ") unless every rank of world_size had it. ranks[i] sent messages[i]; ranks ascend.
std::string merge_rank_messages(const std::vector<int>& ranks, const std::vector<std::string>& messages,
                                int world_size);
// "0-3,5,7-8" for sorted ranks.
std::string rank_ranges(const std::vector<int>& ranks);
}  // namespace detail

}  // namespace hone
