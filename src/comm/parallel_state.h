// ParallelState: this rank's place in the rank grid and the host communicators of its groups, made once per run
// and handed to whatever communicates (the GRPO trainer, the policy engines). Device (NCCL) communicators are made
// from it where they are needed (an engine's connect()), over the same groups.
//
//   hone::ParallelState ps(hone::RankGrid(hone::world_size(), tp, pp));  // collective over the world
//   ps.dp().all_reduce_sum(x, n);                                        // host collectives of this rank's dp group
//   if (ps.dp_rank() == 0) ...;
//   auto nccl = ps.device(hone::CommGroup::dp, {.timeout_s = 600});      // GPU: collective over the dp group
//
// Groups: world, tp, cp, dp, pp, and the expert groups ep and edp carved out of cp x dp, plus dp_cp (every rank
// of one tp and pp place: where the dense gradients are summed when cp > 1). runtime/rank_grid.h has the layout.
// Without MPI every group is this rank alone and the grid must be one rank. A default run has tp = cp = pp = ep = 1,
// so dp is the world. Plain header.
#pragma once

#include <memory>
#include <string>

#include "comm/comm.h"
#include "comm/comm_factory.h"
#include "runtime/rank_grid.h"

namespace hone {

class ParallelState {
 public:
  // Collective over the world when MPI is active: the grid's sub-communicators (CommFactory) and a host Comm for
  // each group. grid.world_size() must be the run's rank count (1 without MPI).
  explicit ParallelState(const RankGrid& grid);
  ~ParallelState();
  ParallelState(const ParallelState&) = delete;
  ParallelState& operator=(const ParallelState&) = delete;

  const RankGrid& grid() const { return factory_->grid(); }
  const CommFactory& factory() const { return *factory_; }
  const RankCoord& coord() const { return coord_; }  // this rank's place in the grid

  int world_rank() const { return world_rank_; }
  int world_size() const { return grid().world_size(); }
  int dp_rank() const { return coord_.dp; }
  int dp_size() const { return grid().dp(); }
  int tp_rank() const { return coord_.tp; }
  int tp_size() const { return grid().tp(); }
  int pp_rank() const { return coord_.pp; }
  int pp_size() const { return grid().pp(); }
  int cp_rank() const { return coord_.cp; }
  int cp_size() const { return grid().cp(); }
  int ep_rank() const { return grid().ep_rank(world_rank_); }
  int ep_size() const { return grid().ep(); }
  int edp_rank() const { return grid().edp_rank(world_rank_); }
  int edp_size() const { return grid().edp(); }
  int dp_cp_rank() const { return grid().group_rank(GridGroup::dp_cp, world_rank_); }
  int dp_cp_size() const { return grid().group_size(GridGroup::dp_cp); }

  // The host collectives (MpiComm) of this rank's groups, valid while this object lives. Collectives are not
  // part of the object's state: a const ParallelState hands out usable communicators.
  Comm& world() const { return *world_; }
  Comm& dp() const { return *dp_; }
  Comm& tp() const { return *tp_; }
  Comm& pp() const { return *pp_; }
  Comm& cp() const { return host(CommGroup::cp); }
  Comm& dp_cp() const { return host(CommGroup::dp_cp); }
  Comm& ep() const { return host(CommGroup::ep); }
  Comm& edp() const { return host(CommGroup::edp); }
  Comm& host(CommGroup g) const;

#if HONE_CUDA
  // A new NCCL communicator of this rank's group g on the current CUDA device. Collective over the group.
  std::unique_ptr<NcclComm> device(CommGroup g, NcclOptions options) const { return factory_->device(g, options); }
#endif

  // "4 ranks: dp 2 x tp 2 x pp 1" for logs (cp and ep named when > 1).
  std::string describe() const;

 private:
  std::unique_ptr<CommFactory> factory_;
  RankCoord coord_;
  int world_rank_ = 0;
  std::unique_ptr<Comm> world_, dp_, tp_, pp_, cp_, dp_cp_, ep_, edp_;
};

}  // namespace hone
