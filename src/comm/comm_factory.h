// Communicators for the groups of the rank grid, of the right kind: host (MpiComm over the world or the dp/tp/pp
// sub-communicator of runtime/grid_comms.h) or device (NcclComm bootstrapped over that host group).
//
//   hone::CommFactory comms(grid);                                   // collective over the world
//   std::unique_ptr<hone::Comm> dp = comms.host(hone::CommGroup::dp);
//   std::unique_ptr<hone::NcclComm> dp_gpu = comms.device(hone::CommGroup::dp, {.timeout_s = 600});  // collective over dp
//
// Without MPI running every group is this rank alone (the grid must then be one rank). A run makes one through
// ParallelState (comm/parallel_state.h), which holds it with the host Comm of every group. Plain header (no mpi.h).
#pragma once

#include <memory>

#include "comm/comm.h"
#include "runtime/rank_grid.h"

#if HONE_CUDA
#include "comm/nccl_comm.h"
#endif

namespace hone {

// The groups of the rank grid (runtime/rank_grid.h): the world and each GridGroup kind.
enum class CommGroup { world, dp, tp, pp, cp, dp_cp, ep, edp };
const char* comm_group_name(CommGroup g);
GridGroup grid_group(CommGroup g);  // g != world

class CommFactory {
 public:
  // Collective over MPI_COMM_WORLD when MPI is active (makes the grid's sub-communicators).
  explicit CommFactory(const RankGrid& grid);
  ~CommFactory();
  CommFactory(const CommFactory&) = delete;
  CommFactory& operator=(const CommFactory&) = delete;

  const RankGrid& grid() const { return grid_; }
  // Host collectives of this rank's group g (an MpiComm; valid while this factory lives).
  std::unique_ptr<Comm> host(CommGroup g) const;
#if HONE_CUDA
  // A new NCCL communicator for this rank's group g, on the current CUDA device. Collective over the group.
  std::unique_ptr<NcclComm> device(CommGroup g, NcclOptions options) const;
#endif

 private:
  struct Impl;
  RankGrid grid_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hone
