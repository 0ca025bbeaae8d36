// Rank grid arithmetic.
#include "runtime/rank_grid.h"

#include "runtime/error.h"

namespace hone {

RankGrid::RankGrid(int world_size, int tp, int pp, int cp, int ep)
    : world_(world_size), tp_(tp), pp_(pp), cp_(cp), ep_(ep), dp_(0) {
  HONE_CHECK(world_size >= 1, "world size ", world_size);
  HONE_USER_CHECK(tp >= 1, "parallel.tp = ", tp, " must be at least 1");
  HONE_USER_CHECK(pp >= 1, "parallel.pp = ", pp, " must be at least 1");
  HONE_USER_CHECK(cp >= 1, "parallel.cp = ", cp, " must be at least 1");
  HONE_USER_CHECK(ep >= 1, "parallel.ep = ", ep, " must be at least 1");
  if (cp == 1) {
    HONE_USER_CHECK(world_size % (tp * pp) == 0, "the number of ranks (", world_size,
                    ") is not divisible by parallel.tp * parallel.pp = ", tp, " * ", pp, " = ", tp * pp,
                    "; run on a multiple of ", tp * pp, " ranks or change parallel.tp / parallel.pp");
  } else {
    HONE_USER_CHECK(world_size % (tp * cp * pp) == 0, "the number of ranks (", world_size,
                    ") is not divisible by parallel.tp * parallel.cp * parallel.pp = ", tp, " * ", cp, " * ", pp, " = ",
                    tp * cp * pp, "; run on a multiple of ", tp * cp * pp,
                    " ranks or change parallel.tp / parallel.cp / parallel.pp");
  }
  dp_ = world_size / (tp * cp * pp);
  HONE_USER_CHECK((cp * dp_) % ep == 0, "parallel.ep = ", ep, " does not divide the ", cp * dp_,
                  " ranks of one tensor- and pipeline-parallel place (parallel.cp * dp = ", cp, " * ", dp_,
                  "): experts are split over ranks that hold the same dense shard; run on more ranks or change "
                  "parallel.ep");
}

RankCoord RankGrid::coord(int rank) const {
  HONE_CHECK(rank >= 0 && rank < world_, "rank ", rank, " outside a world of ", world_);
  RankCoord c;
  c.tp = rank % tp_;
  c.cp = (rank / tp_) % cp_;
  c.dp = (rank / (tp_ * cp_)) % dp_;
  c.pp = rank / (tp_ * cp_ * dp_);
  return c;
}

int RankGrid::rank(const RankCoord& c) const {
  HONE_CHECK(c.dp >= 0 && c.dp < dp_ && c.tp >= 0 && c.tp < tp_ && c.pp >= 0 && c.pp < pp_ && c.cp >= 0 && c.cp < cp_,
             "coordinate (dp ", c.dp, ", tp ", c.tp, ", pp ", c.pp, ", cp ", c.cp, ") outside grid dp ", dp_, " x tp ",
             tp_, " x pp ", pp_, " x cp ", cp_);
  return c.tp + tp_ * (c.cp + cp_ * (c.dp + dp_ * c.pp));
}

int RankGrid::ep_rank(int r) const { return group_rank(GridGroup::dp_cp, r) % ep_; }
int RankGrid::edp_rank(int r) const { return group_rank(GridGroup::dp_cp, r) / ep_; }

int RankGrid::group_rank(GridGroup k, int r) const {
  const RankCoord c = coord(r);
  switch (k) {
    case GridGroup::tp: return c.tp;
    case GridGroup::cp: return c.cp;
    case GridGroup::dp: return c.dp;
    case GridGroup::pp: return c.pp;
    case GridGroup::dp_cp: return c.cp + cp_ * c.dp;
    case GridGroup::ep: return (c.cp + cp_ * c.dp) % ep_;
    case GridGroup::edp: return (c.cp + cp_ * c.dp) / ep_;
  }
  return 0;
}

int RankGrid::group_size(GridGroup k) const {
  switch (k) {
    case GridGroup::tp: return tp_;
    case GridGroup::cp: return cp_;
    case GridGroup::dp: return dp_;
    case GridGroup::pp: return pp_;
    case GridGroup::dp_cp: return dp_ * cp_;
    case GridGroup::ep: return ep_;
    case GridGroup::edp: return edp();
  }
  return 1;
}

std::vector<int> RankGrid::group(GridGroup k, int r) const {
  const RankCoord c = coord(r);
  std::vector<int> out;
  const int n = group_size(k);
  for (int i = 0; i < n; ++i) {
    RankCoord m = c;
    switch (k) {
      case GridGroup::tp: m.tp = i; break;
      case GridGroup::cp: m.cp = i; break;
      case GridGroup::dp: m.dp = i; break;
      case GridGroup::pp: m.pp = i; break;
      case GridGroup::dp_cp: m.cp = i % cp_, m.dp = i / cp_; break;
      case GridGroup::ep:
      case GridGroup::edp: {
        const int j = c.cp + cp_ * c.dp;
        const int jm = k == GridGroup::ep ? (j / ep_) * ep_ + i : j % ep_ + i * ep_;
        m.cp = jm % cp_, m.dp = jm / cp_;
        break;
      }
    }
    out.push_back(rank(m));
  }
  return out;
}

int RankGrid::group_id(GridGroup k, int r) const {
  const RankCoord c = coord(r);
  const int j = c.cp + cp_ * c.dp;  // place in the dp x cp ranks of (tp, pp)
  switch (k) {
    case GridGroup::tp: return j + cp_ * dp_ * c.pp;
    case GridGroup::cp: return c.tp + tp_ * (c.dp + dp_ * c.pp);
    case GridGroup::dp: return c.tp + tp_ * (c.cp + cp_ * c.pp);
    case GridGroup::pp: return c.tp + tp_ * j;
    case GridGroup::dp_cp: return c.tp + tp_ * c.pp;
    case GridGroup::ep: return c.tp + tp_ * (j / ep_ + edp() * c.pp);
    case GridGroup::edp: return c.tp + tp_ * (j % ep_ + ep_ * c.pp);
  }
  return 0;
}

}  // namespace hone
