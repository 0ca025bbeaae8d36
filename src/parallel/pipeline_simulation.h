// Every pipeline rank's action list (parallel/pipeline_schedule.h) run together, without a model: each compute
// action takes a fixed time, each exchange waits until every half of it has met the peer's opposite half
// (rendezvous: a send completes only when the receiver has posted its receive, as NCCL and large MPI messages do).
// Messages between a pair of ranks match in the order they are posted, and the simulation checks that the k-th
// message sent is the k-th one the peer expects. It proves a schedule free of deadlock and mismatch, checks that
// every forward precedes its backward and that each input arrives before its compute action, and measures the
// bubble: the idle fraction of a rank's time. The step's output reports the bubble of the schedule it ran.
// Plain header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace hone {

struct PipelineSimulation {
  bool completed = false;
  std::string problem;  // what went wrong (deadlock: every rank's blocked action; mismatch; order), empty when none
  double makespan = 0;  // time until the last rank finishes
  double busy = 0;      // compute time of the busiest rank
  int64_t messages = 0;

  // Idle share of the makespan on the busiest rank (every rank computes the same amount with equal chunks).
  double bubble_fraction() const { return makespan > 0 ? 1.0 - busy / makespan : 0.0; }
};

// forward_time, backward_time: one micro-batch through one rank's whole share of the layers (a virtual chunk takes
// 1 / vpp of it).
PipelineSimulation simulate_pipeline(const PipelineSchedule& s, double forward_time = 1.0, double backward_time = 2.0);
// The same for given action lists (actions[r]: pipeline rank r's), e.g. a schedule altered on purpose.
PipelineSimulation simulate_actions(const PipelineSchedule& s, const std::vector<std::vector<PipeAction>>& actions,
                                    double forward_time = 1.0, double backward_time = 2.0);

}  // namespace hone
