// The rank grid: world ranks laid out as tp x cp x dp x pp, tensor-parallel innermost, then context-parallel, then
// data-parallel, then pipeline (Megatron-Core's default order "tp-cp-ep-dp-pp"):
//   tp_rank = r % tp,  cp_rank = (r / tp) % cp,  dp_rank = (r / (tp cp)) % dp,  pp_rank = r / (tp cp dp),
//   dp = world / (tp cp pp).
// Expert parallelism is carved out of the cp x dp ranks of one (tp, pp) place, as Megatron's expert groups are
// (expert tensor parallelism = tp): with j = cp_rank + cp * dp_rank the place in that group,
//   ep_rank = j % ep,  edp_rank = j / ep  (expert-data-parallel: the ranks holding the same experts),
// so ep must divide cp x dp. Dense gradients are summed over the dp_cp group (every rank of one tp and pp place:
// context-parallel ranks hold the same weights and see other tokens); expert gradients over edp.
// Pure arithmetic (no MPI): runtime/grid_comms.h makes the MPI sub-communicators from it.
//
//   RankGrid g(8, /*tp=*/2, /*pp=*/2);   // dp = 2
//   g.coord(5) == {dp 0, tp 1, pp 1};   g.tp_group(5) == {4, 5};   g.dp_group(5) == {5, 7};   g.pp_group(5) == {1, 5}
#pragma once

#include <vector>

namespace hone {

struct RankCoord {
  int dp = 0, tp = 0, pp = 0, cp = 0;
  bool operator==(const RankCoord&) const = default;
};

// The kinds of group a rank belongs to: the ranks that differ from it only in these coordinates.
enum class GridGroup { tp, cp, dp, pp, dp_cp, ep, edp };

class RankGrid {
 public:
  // UserError naming the parallel.* keys when a size is < 1, world_size is not divisible by tp * cp * pp, or ep does
  // not divide cp * dp.
  RankGrid(int world_size, int tp, int pp, int cp = 1, int ep = 1);

  int world_size() const { return world_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return dp_; }
  int cp() const { return cp_; }
  int ep() const { return ep_; }
  int edp() const { return cp_ * dp_ / ep_; }

  RankCoord coord(int rank) const;      // Error when rank is outside [0, world_size)
  int rank(const RankCoord& c) const;   // inverse of coord
  int ep_rank(int rank) const;
  int edp_rank(int rank) const;
  // This rank's index in its group of kind k (ep_rank, edp_rank, cp + cp_size * dp for dp_cp, ...).
  int group_rank(GridGroup k, int rank) const;
  int group_size(GridGroup k) const;

  // The world ranks sharing rank's group of kind k, ordered by their index in it (rank's own index is
  // group_rank(k, rank)).
  std::vector<int> group(GridGroup k, int rank) const;
  // Which group of kind k rank belongs to (0-based, dense): ranks with equal ids share the group.
  int group_id(GridGroup k, int rank) const;

  std::vector<int> tp_group(int rank) const { return group(GridGroup::tp, rank); }  // same cp, dp, pp
  std::vector<int> dp_group(int rank) const { return group(GridGroup::dp, rank); }  // same tp, cp, pp
  std::vector<int> pp_group(int rank) const { return group(GridGroup::pp, rank); }  // same tp, cp, dp
  std::vector<int> cp_group(int rank) const { return group(GridGroup::cp, rank); }  // same tp, dp, pp
  int tp_group_id(int rank) const { return group_id(GridGroup::tp, rank); }
  int dp_group_id(int rank) const { return group_id(GridGroup::dp, rank); }
  int pp_group_id(int rank) const { return group_id(GridGroup::pp, rank); }

 private:
  int world_, tp_, pp_, cp_, ep_, dp_;
};

}  // namespace hone
