// The rank grid: world ranks laid out as dp x tp x pp, tensor-parallel innermost, then data-parallel, then
// pipeline:  tp_rank = r % tp,  dp_rank = (r / tp) % dp,  pp_rank = r / (tp * dp),  dp = world / (tp * pp).
// Pure arithmetic (no MPI): runtime/grid_comms.h makes the MPI sub-communicators from it.
//
//   RankGrid g(8, /*tp=*/2, /*pp=*/2);   // dp = 2
//   g.coord(5) == {dp 0, tp 1, pp 1};   g.tp_group(5) == {4, 5};   g.dp_group(5) == {5, 7};   g.pp_group(5) == {1, 5}
#pragma once

#include <vector>

namespace hone {

struct RankCoord {
  int dp = 0, tp = 0, pp = 0;
  bool operator==(const RankCoord&) const = default;
};

class RankGrid {
 public:
  // UserError naming parallel.tp / parallel.pp when tp or pp < 1 or world_size is not divisible by tp * pp.
  RankGrid(int world_size, int tp, int pp);

  int world_size() const { return world_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return dp_; }

  RankCoord coord(int rank) const;      // Error when rank is outside [0, world_size)
  int rank(const RankCoord& c) const;   // inverse of coord
  // The world ranks sharing rank's group, ascending; rank's index in the list is its rank in that group.
  std::vector<int> tp_group(int rank) const;  // same dp and pp: tp consecutive ranks
  std::vector<int> dp_group(int rank) const;  // same tp and pp
  std::vector<int> pp_group(int rank) const;  // same dp and tp
  // Which group of each kind rank belongs to (0-based, dense): ranks with equal ids share the group.
  int tp_group_id(int rank) const;
  int dp_group_id(int rank) const;
  int pp_group_id(int rank) const;

 private:
  int world_, tp_, pp_, dp_;
};

}  // namespace hone
