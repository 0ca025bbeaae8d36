// Rank grid arithmetic.
#include "runtime/rank_grid.h"

#include "runtime/error.h"

namespace hone {

RankGrid::RankGrid(int world_size, int tp, int pp) : world_(world_size), tp_(tp), pp_(pp), dp_(0) {
  HONE_CHECK(world_size >= 1, "world size ", world_size);
  HONE_USER_CHECK(tp >= 1, "parallel.tp = ", tp, " must be at least 1");
  HONE_USER_CHECK(pp >= 1, "parallel.pp = ", pp, " must be at least 1");
  HONE_USER_CHECK(world_size % (tp * pp) == 0, "the number of ranks (", world_size,
                  ") is not divisible by parallel.tp * parallel.pp = ", tp, " * ", pp, " = ", tp * pp,
                  "; run on a multiple of ", tp * pp, " ranks or change parallel.tp / parallel.pp");
  dp_ = world_size / (tp * pp);
}

RankCoord RankGrid::coord(int rank) const {
  HONE_CHECK(rank >= 0 && rank < world_, "rank ", rank, " outside a world of ", world_);
  return RankCoord{(rank / tp_) % dp_, rank % tp_, rank / (tp_ * dp_)};
}

int RankGrid::rank(const RankCoord& c) const {
  HONE_CHECK(c.dp >= 0 && c.dp < dp_ && c.tp >= 0 && c.tp < tp_ && c.pp >= 0 && c.pp < pp_, "coordinate (dp ", c.dp,
             ", tp ", c.tp, ", pp ", c.pp, ") outside grid dp ", dp_, " x tp ", tp_, " x pp ", pp_);
  return c.tp + tp_ * (c.dp + dp_ * c.pp);
}

std::vector<int> RankGrid::tp_group(int r) const {
  RankCoord c = coord(r);
  std::vector<int> out;
  for (c.tp = 0; c.tp < tp_; ++c.tp) out.push_back(rank(c));
  return out;
}

std::vector<int> RankGrid::dp_group(int r) const {
  RankCoord c = coord(r);
  std::vector<int> out;
  for (c.dp = 0; c.dp < dp_; ++c.dp) out.push_back(rank(c));
  return out;
}

std::vector<int> RankGrid::pp_group(int r) const {
  RankCoord c = coord(r);
  std::vector<int> out;
  for (c.pp = 0; c.pp < pp_; ++c.pp) out.push_back(rank(c));
  return out;
}

int RankGrid::tp_group_id(int r) const {
  const RankCoord c = coord(r);
  return c.dp + dp_ * c.pp;
}

int RankGrid::dp_group_id(int r) const {
  const RankCoord c = coord(r);
  return c.tp + tp_ * c.pp;
}

int RankGrid::pp_group_id(int r) const {
  const RankCoord c = coord(r);
  return c.tp + tp_ * c.dp;
}

}  // namespace hone
