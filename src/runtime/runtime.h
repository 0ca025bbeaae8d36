// The process runtime: MPI start and stop, this rank's place among all ranks, and ending every rank on a fatal error.
// A plain `hone ...` without mpirun is one rank (MPI singleton).
#pragma once

#include <string>

namespace hone {

class Runtime {
 public:
  Runtime(int* argc, char*** argv);  // MPI_Init_thread (unless already initialized)
  ~Runtime();                        // MPI_Finalize (unless already finalized)
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
};

// World rank and size; 0 and 1 when MPI is not initialized.
int world_rank();
int world_size();

// Ends the run after an error: prints `message` once ("hone: error: ..."), then ends every rank with `exit_code`.
//   collective = true: every rank reached this same error (e.g. a deck error, checked on all ranks); rank 0 prints,
//                      every rank finalizes MPI and exits with exit_code.
//   collective = false: this rank alone failed; it prints with a [rank r] prefix and aborts all ranks.
[[noreturn]] void fatal_exit(int exit_code, const std::string& message, bool collective);

}  // namespace hone
