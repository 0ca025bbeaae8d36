// Sub-communicators by MPI_Comm_split: color = the group id, key = the rank's index in its group (so the order
// follows the group list).
#include "runtime/grid_comms.h"

#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone {

GridComms::GridComms(const RankGrid& grid, MPI_Comm world) {
  comms_.fill(MPI_COMM_NULL);
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  HONE_CHECK(size == grid.world_size(), "grid of ", grid.world_size(), " ranks on a communicator of ", size);
  for (int k = 0; k < kKinds; ++k) {
    const GridGroup g = static_cast<GridGroup>(k);
    MPI_CHECK(MPI_Comm_split(world, grid.group_id(g, rank), grid.group_rank(g, rank), &comms_[static_cast<size_t>(k)]));
  }
}

GridComms::~GridComms() {
  if (!mpi_active()) return;
  for (MPI_Comm& c : comms_)
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

}  // namespace hone
