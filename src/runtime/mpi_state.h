// Internal to src/runtime: the MPI state the Runtime sets up and the fatal-error and agreement code uses.
#pragma once

#include <mpi.h>

namespace hone::detail {

// A duplicate of MPI_COMM_WORLD used only by fatal_exit, so that its messages never
// match a collective the program has in flight on MPI_COMM_WORLD. MPI_COMM_WORLD when the Runtime has not set it up.
MPI_Comm error_comm();

}  // namespace hone::detail

#include <string>
#include <vector>

namespace hone::detail {
// Collective over comm: every rank's `mine`, indexed by rank. False when an MPI call failed.
bool allgather_strings(MPI_Comm comm, const std::string& mine, std::vector<std::string>* all);
}  // namespace hone::detail
