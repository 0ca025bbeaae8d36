// ParallelState: the CommFactory of the run's grid and one host Comm per group, made once.
#include "comm/parallel_state.h"

#include "runtime/error.h"
#include "runtime/runtime.h"

namespace hone {

ParallelState::ParallelState(const RankGrid& grid)
    : factory_(std::make_unique<CommFactory>(grid)), world_rank_(hone::world_rank()) {
  coord_ = grid.coord(world_rank_);
  world_ = factory_->host(CommGroup::world);
  dp_ = factory_->host(CommGroup::dp);
  tp_ = factory_->host(CommGroup::tp);
  pp_ = factory_->host(CommGroup::pp);
  cp_ = factory_->host(CommGroup::cp);
  dp_cp_ = factory_->host(CommGroup::dp_cp);
  ep_ = factory_->host(CommGroup::ep);
  edp_ = factory_->host(CommGroup::edp);
  // The sub-communicators order their members as the grid's group lists do.
  HONE_CHECK(dp_->size() == grid.dp() && dp_->rank() == coord_.dp && tp_->size() == grid.tp() &&
                 tp_->rank() == coord_.tp && pp_->size() == grid.pp() && pp_->rank() == coord_.pp &&
                 cp_->size() == grid.cp() && cp_->rank() == coord_.cp && ep_->size() == grid.ep() &&
                 ep_->rank() == ep_rank() && edp_->size() == grid.edp() && edp_->rank() == edp_rank() &&
                 dp_cp_->size() == dp_cp_size() && dp_cp_->rank() == dp_cp_rank(),
             "the communicators of world rank ", world_rank_, " disagree with the rank grid");
}

ParallelState::~ParallelState() = default;

Comm& ParallelState::host(CommGroup g) const {
  switch (g) {
    case CommGroup::world: return *world_;
    case CommGroup::dp: return *dp_;
    case CommGroup::tp: return *tp_;
    case CommGroup::pp: return *pp_;
    case CommGroup::cp: return *cp_;
    case CommGroup::dp_cp: return *dp_cp_;
    case CommGroup::ep: return *ep_;
    case CommGroup::edp: return *edp_;
  }
  HONE_CHECK(false, "unknown communicator group ", int(g));
  return *world_;
}

std::string ParallelState::describe() const {
  std::string s = cat(world_size(), world_size() == 1 ? " rank" : " ranks", ": dp ", dp_size(), " x tp ", tp_size(),
                      " x pp ", pp_size());
  if (cp_size() > 1) s += cat(" x cp ", cp_size());
  if (ep_size() > 1) s += cat(", ep ", ep_size(), " (expert-data-parallel ", edp_size(), ")");
  return s;
}

}  // namespace hone
