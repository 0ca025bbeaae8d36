// MPI sub-communicators of a RankGrid: this rank's group of every kind (tensor-, context-, data-, pipeline-,
// expert-parallel, expert-data-parallel, and the data x context group of the dense gradients). Rank i of each
// communicator is the i-th entry of the RankGrid's group list. Host-only header (includes mpi.h).
// (NCCL communicators for the GPU are made the same way from the same group lists.)
#pragma once

#include <mpi.h>

#include <array>

#include "runtime/rank_grid.h"

namespace hone {

class GridComms {
 public:
  static constexpr int kKinds = 7;  // the GridGroup values
  // Collective over world (every rank of it calls it); grid.world_size() must equal world's size.
  GridComms(const RankGrid& grid, MPI_Comm world = MPI_COMM_WORLD);
  ~GridComms();  // frees the communicators (while MPI is still running)
  GridComms(const GridComms&) = delete;
  GridComms& operator=(const GridComms&) = delete;

  MPI_Comm get(GridGroup k) const { return comms_[static_cast<size_t>(k)]; }
  MPI_Comm tp() const { return get(GridGroup::tp); }
  MPI_Comm dp() const { return get(GridGroup::dp); }
  MPI_Comm pp() const { return get(GridGroup::pp); }

 private:
  std::array<MPI_Comm, kKinds> comms_;
};

}  // namespace hone
