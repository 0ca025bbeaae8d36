// CommFactory: the grid's MPI sub-communicators, wrapped as MpiComm, and NCCL communicators bootstrapped over them.
#include "comm/comm_factory.h"

#include <optional>

#include "comm/mpi_comm.h"
#include "runtime/error.h"
#include "runtime/grid_comms.h"
#include "runtime/runtime.h"

namespace hone {

const char* comm_group_name(CommGroup g) {
  switch (g) {
    case CommGroup::world: return "world";
    case CommGroup::dp: return "dp";
    case CommGroup::tp: return "tp";
    case CommGroup::pp: return "pp";
    case CommGroup::cp: return "cp";
    case CommGroup::dp_cp: return "dp_cp";
    case CommGroup::ep: return "ep";
    case CommGroup::edp: return "edp";
  }
  return "?";
}

GridGroup grid_group(CommGroup g) {
  switch (g) {
    case CommGroup::dp: return GridGroup::dp;
    case CommGroup::tp: return GridGroup::tp;
    case CommGroup::pp: return GridGroup::pp;
    case CommGroup::cp: return GridGroup::cp;
    case CommGroup::dp_cp: return GridGroup::dp_cp;
    case CommGroup::ep: return GridGroup::ep;
    case CommGroup::edp: return GridGroup::edp;
    case CommGroup::world: break;
  }
  HONE_CHECK(false, "the world is no group of the grid");
  return GridGroup::dp;
}

struct CommFactory::Impl {
  std::optional<GridComms> comms;  // empty without MPI
};

CommFactory::CommFactory(const RankGrid& grid) : grid_(grid), impl_(std::make_unique<Impl>()) {
  if (mpi_active()) {
    HONE_CHECK(grid.world_size() == world_size(), "the rank grid has ", grid.world_size(), " ranks, the run ",
               world_size());
    impl_->comms.emplace(grid);
  } else {
    HONE_CHECK(grid.world_size() == 1, "a rank grid of ", grid.world_size(), " ranks needs MPI");
  }
}

CommFactory::~CommFactory() = default;

std::unique_ptr<Comm> CommFactory::host(CommGroup g) const {
  const std::string name = comm_group_name(g);
  if (!impl_->comms) {
    auto c = std::make_unique<MpiComm>(MPI_COMM_NULL, name);
    return c;
  }
  const GridComms& gc = *impl_->comms;
  MPI_Comm comm = g == CommGroup::world ? MPI_COMM_WORLD : gc.get(grid_group(g));
  return std::make_unique<MpiComm>(comm, name);
}

#if HONE_CUDA
std::unique_ptr<NcclComm> CommFactory::device(CommGroup g, NcclOptions options) const {
  const std::unique_ptr<Comm> bootstrap = host(g);
  return std::make_unique<NcclComm>(*bootstrap, std::move(options));
}
#endif

}  // namespace hone
