// The first and last pipeline stages' pair (embedding_group.h).
#include "parallel/embedding_group.h"

#include <mpi.h>

#include "comm/mpi_comm.h"
#include "runtime/error.h"
#include "runtime/mpi_check.h"
#include "runtime/runtime.h"

namespace hone {

struct EmbeddingGroup::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  std::unique_ptr<MpiComm> host;
};

EmbeddingGroup::EmbeddingGroup(const RankGrid& grid, int world_rank) : impl_(std::make_unique<Impl>()) {
  const RankCoord c = grid.coord(world_rank);
  const bool member = grid.pp() > 1 && (c.pp == 0 || c.pp == grid.pp() - 1);
  if (!mpi_active()) {
    HONE_CHECK(!member, "an embedding group across stages needs MPI");
    return;
  }
  MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, member ? grid.pp_group_id(world_rank) : MPI_UNDEFINED,
                           c.pp == 0 ? 0 : 1, &impl_->comm));
  if (member) impl_->host = std::make_unique<MpiComm>(impl_->comm, "embedding");
}

EmbeddingGroup::~EmbeddingGroup() {
  impl_->host.reset();
  if (impl_->comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&impl_->comm);
}

bool EmbeddingGroup::member() const { return impl_->host != nullptr; }

Comm& EmbeddingGroup::host() const {
  HONE_CHECK(impl_->host, "this rank is in no embedding group");
  return *impl_->host;
}

}  // namespace hone
