// The generation layout (generation.tp = Tg): the world's ranks in generation replicas of Tg consecutive ranks, each
// holding the whole model (every layer) sharded Tg ways for decoding, whatever the training layout (tp x cp x dp x
// pp) is: pipeline stages and context-parallel ranks become generation replicas with no special case. The step's
// prompts are split over the replicas (groups stay whole) and the rollouts are then moved to the training
// data-parallel ranks that train on them (rl/rollout_exchange.h); refit reshards the training weights into each
// replica's shard (parallel/reshard.h). When every replica is exactly a training tensor-parallel group holding the
// whole model (pp = cp = 1 and Tg = tp), generation runs on the training weights as before: no copy, no exchange.
//
//   GenerationLayout g = GenerationLayout::of(grid, /*tg=*/4);   // world 16 at tp 4 x pp 4: replicas 0..3
//   g.replica(5) == 1;  g.rank_in_replica(5) == 1;  g.leader(1) == 4
// Pure arithmetic; GenerationGroup (below) makes the replica's host communicator.
#pragma once

#include <memory>

#include "comm/comm.h"
#include "runtime/rank_grid.h"

namespace hone {

struct GenerationLayout {
  int world = 1;
  int tg = 1;                      // ranks per replica
  bool same_as_training = true;    // replicas are the training tp groups, each with the whole model

  // UserError when tg does not divide the world (naming generation.tp).
  static GenerationLayout of(const RankGrid& grid, int tg);
  int replicas() const { return world / tg; }
  int replica(int world_rank) const { return world_rank / tg; }
  int rank_in_replica(int world_rank) const { return world_rank % tg; }
  int leader(int replica) const { return replica * tg; }
};

// This rank's replica as a host communicator (MPI_Comm_split of the world; without MPI a group of one). Collective
// over the world when made.
class GenerationGroup {
 public:
  GenerationGroup(const RankGrid& grid, int tg);
  ~GenerationGroup();
  GenerationGroup(const GenerationGroup&) = delete;
  GenerationGroup& operator=(const GenerationGroup&) = delete;

  const GenerationLayout& layout() const { return layout_; }
  Comm& host() const;  // the replica's ranks, in world order

 private:
  struct Impl;
  GenerationLayout layout_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hone
