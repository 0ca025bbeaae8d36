// Sub-communicators by MPI_Comm_split: color = the group id, key = the world rank (so order follows the group list).
#include "runtime/grid_comms.h"

#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone {

GridComms::GridComms(const RankGrid& grid, MPI_Comm world) {
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  MPI_CHECK(MPI_Comm_size(world, &size));
  HONE_CHECK(size == grid.world_size(), "grid of ", grid.world_size(), " ranks on a communicator of ", size);
  MPI_CHECK(MPI_Comm_split(world, grid.tp_group_id(rank), rank, &tp_));
  MPI_CHECK(MPI_Comm_split(world, grid.dp_group_id(rank), rank, &dp_));
  MPI_CHECK(MPI_Comm_split(world, grid.pp_group_id(rank), rank, &pp_));
}

GridComms::~GridComms() {
  if (!mpi_active()) return;
  for (MPI_Comm* c : {&tp_, &dp_, &pp_})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

}  // namespace hone
