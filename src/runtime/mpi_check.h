// MPI_CHECK(call): throws hone::Error naming the call, MPI_Error_string's text, file and line when an MPI call
// fails, e.g. "MPI_CHECK(MPI_Send(...)) failed: MPI_ERR_RANK: invalid rank at src/runtime/x.cpp:12".
// The Runtime sets MPI_ERRORS_RETURN on MPI_COMM_WORLD (inherited by communicators made from it), so failures
// reach the check instead of aborting inside MPI. Host-only header (includes mpi.h): never from a .cu file.
#pragma once

#include <mpi.h>

#include "runtime/error.h"

namespace hone::detail {
[[noreturn]] void mpi_call_failed(int code, const char* expr, const char* file, int line);
}  // namespace hone::detail

#define MPI_CHECK(call)                                                                  \
  do {                                                                                   \
    const int hone_mpi_rc_ = (call);                                                     \
    if (hone_mpi_rc_ != MPI_SUCCESS)                                                     \
      ::hone::detail::mpi_call_failed(hone_mpi_rc_, #call, __FILE__, __LINE__);          \
  } while (0)
