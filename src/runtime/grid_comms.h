// MPI sub-communicators of a RankGrid: this rank's tensor-, data- and pipeline-parallel groups. Rank i of each
// communicator is the i-th entry of the RankGrid's group list. Host-only header (includes mpi.h).
// (NCCL communicators for the GPU are made the same way from the same group lists.)
#pragma once

#include <mpi.h>

#include "runtime/rank_grid.h"

namespace hone {

class GridComms {
 public:
  // Collective over world (every rank of it calls it); grid.world_size() must equal world's size.
  GridComms(const RankGrid& grid, MPI_Comm world = MPI_COMM_WORLD);
  ~GridComms();  // frees the communicators (while MPI is still running)
  GridComms(const GridComms&) = delete;
  GridComms& operator=(const GridComms&) = delete;

  MPI_Comm tp() const { return tp_; }
  MPI_Comm dp() const { return dp_; }
  MPI_Comm pp() const { return pp_; }

 private:
  MPI_Comm tp_ = MPI_COMM_NULL, dp_ = MPI_COMM_NULL, pp_ = MPI_COMM_NULL;
};

}  // namespace hone
