// The watchdog of hone's MPI operations, like NcclComm's for NCCL: a blocking MPI call cannot be given up on, so
// every MPI operation where ranks wait for each other (the collectives and messages of MpiComm, the agreement on
// errors, the per-step stop check) is started as its non-blocking twin (MPI_Iallreduce, MPI_Irecv, ...) and waited
// on here: MPI_Testall is polled (spinning at first, then yielding, then sleeping) until the operation completes or
// the collective timeout passes. A timeout means a rank of the group stopped answering (a stopped or hung process,
// a lost node) or is far behind: the run ends on every rank through fatal_exit, with one message naming the
// operation, its byte count, the group and its world ranks, and the timeout, e.g.
//
//   hone: error: [rank 0] MPI all_reduce_sum of 4 bytes (1 x i32) on the world group (world ranks 0-1) did not
//   complete within 600 s (parallel.collective_timeout_s): a rank of the group stopped answering or is far behind
//
// The timeout is parallel.collective_timeout_s once `hone run` has read the deck (600 s before that, and in
// commands that read none). Host-only header (includes mpi.h): never from a .cu file.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace hone {

constexpr double kDefaultCollectiveTimeoutSeconds = 600;

// Seconds an MPI operation may wait for the other ranks (> 0; applies to the waits that start after the call).
void set_collective_timeout(double seconds);
double collective_timeout();

// What a timeout does. Empty (the default): fatal_exit with exit code 1 (internal error). Tests set a handler to
// observe the message; when the handler returns, the wait goes on (without a deadline) until the operation completes.
// Returns the handler it replaces.
using CollectiveTimeoutHandler = std::function<void(const std::string& message)>;
CollectiveTimeoutHandler set_collective_timeout_handler(CollectiveTimeoutHandler handler);

// Waits for the n requests under the watchdog. `what` describes the operation for the message ("all_reduce_sum of
// 16 bytes (4 x f32) on the dp group (world ranks 0,2)"); it is called only on a timeout. A failed MPI call throws
// hone::Error (as MPI_CHECK).
void mpi_wait_all(int n, MPI_Request* requests, const std::function<std::string()>& what);
inline void mpi_wait(MPI_Request* request, const std::function<std::string()>& what) {
  mpi_wait_all(1, request, what);
}

}  // namespace hone
