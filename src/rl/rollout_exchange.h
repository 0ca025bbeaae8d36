// The step's rollouts moved from the generation replicas that made them (parallel/generation_layout.h) to the
// training ranks that train on them: group order o (a sample's position / G) belongs to data-parallel rank d when o
// lies in shard_range(num_prompts_per_step, d, dp), and every rank of that data-parallel place (its tensor-,
// context- and pipeline-parallel ranks alike) gets all of d's samples, scored, sorted by position. Each destination
// receives a replica's samples from one member of the replica (the one at its own index in the group), so the
// members share the sending. One all-to-all of counts and one of the packed samples over the world (host Comm).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "parallel/generation_layout.h"
#include "rl/grpo_batch.h"
#include "runtime/rank_grid.h"

namespace hone::rl {

// Collective over world. samples: this rank's replica's samples (the same on every member), with positions,
// rewards and rollouts; returns this rank's data-parallel rank's samples in position order (prompt_index unset:
// the prompts stay where they were scored).
std::vector<GrpoSample> exchange_rollouts(const std::vector<GrpoSample>& samples, const GenerationLayout& gen,
                                          const RankGrid& grid, int64_t prompts_per_step, int64_t generations,
                                          Comm& world);

}  // namespace hone::rl
