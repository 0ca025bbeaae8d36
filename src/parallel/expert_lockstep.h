// Generation under expert parallelism (generation.experts = "parallel"): the experts stay split over the
// expert-parallel group as in training, so every forward pass of a generating rank (a prefill or a decode step)
// meets the group's other ranks at each sparse layer's dispatch and combine, and the ranks of the group must run
// the same number of passes although each decodes its own sequences and finishes at its own time. Before each
// real pass a rank votes that it works; once it has nothing left it keeps voting that it does not, and runs an idle
// pass (its experts compute the rows the others send it, it sends none) for every vote some rank still worked in.
// One all-reduce of one value over the group's host Comm per pass:
//
//   before each real forward:   lockstep.vote(true);
//   after the rank's last one:  while (lockstep.vote(false)) idle_pass();
//
// A prefill on one rank pairs with a decode step on another: each pass calls every sparse layer once, in order.
#pragma once

#include "comm/comm.h"

namespace hone {

class ExpertLockstep {
 public:
  explicit ExpertLockstep(Comm& ep) : ep_(ep) {}  // ep outlives this object

  // Collective over the group: whether any rank votes that it works in this pass.
  bool vote(bool working);
  Comm& comm() const { return ep_; }

 private:
  Comm& ep_;
};

}  // namespace hone
