// Generation replicas and their communicator (generation_layout.h).
#include "parallel/generation_layout.h"

#include <mpi.h>

#include "comm/mpi_comm.h"
#include "runtime/error.h"
#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone {

GenerationLayout GenerationLayout::of(const RankGrid& grid, int tg) {
  HONE_USER_CHECK(tg >= 1 && grid.world_size() % tg == 0, "generation.tp = ", tg, " does not divide the ",
                  grid.world_size(), " ranks (generation replicas are groups of generation.tp consecutive ranks)");
  GenerationLayout g;
  g.world = grid.world_size();
  g.tg = tg;
  g.same_as_training = grid.pp() == 1 && grid.cp() == 1 && tg == grid.tp();
  return g;
}

struct GenerationGroup::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<MpiComm> host;
};

GenerationGroup::GenerationGroup(const RankGrid& grid, int tg)
    : layout_(GenerationLayout::of(grid, tg)), impl_(std::make_unique<Impl>()) {
  if (!mpi_active()) {
    HONE_CHECK(grid.world_size() == 1, "generation replicas of ", grid.world_size(), " ranks need MPI");
    impl_->host = std::make_unique<MpiComm>(MPI_COMM_NULL, "generation");
    return;
  }
  const int me = world_rank();
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, layout_.replica(me), layout_.rank_in_replica(me), &impl_->comm));
  impl_->host = std::make_unique<MpiComm>(impl_->comm, "generation");
}

GenerationGroup::~GenerationGroup() {
  impl_->host.reset();
  if (impl_->comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&impl_->comm);
}

Comm& GenerationGroup::host() const { return *impl_->host; }

}  // namespace hone
