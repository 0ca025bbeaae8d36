// The generator role: rollouts from prompts, with its own copy of the weights and its KV cache. The GRPO step asks
// it for the step's rollouts (and validation's), then lets it free what generation held. Today every rank runs a
// generator beside its learner (roles/rank_roles.h); asynchronous GRPO will give generators ranks of their own, fed
// new weights through the weight channel (roles/weight_channel.h) and sending rollouts through the rollout channel
// (roles/rollout_wire.h).
#pragma once

#include <cstdint>
#include <vector>

#include "generation/generation_progress.h"
#include "generation/rollout.h"
#include "generation/sampler.h"
#include "generation/stop_conditions.h"

namespace hone::roles {

class Generator {
 public:
  virtual ~Generator() = default;
  // The rollouts of `requests` (keyed by their global sample index: the same tokens whatever the layout), sampled
  // with the Philox stream of (seed, step). Collective over the generation replica.
  virtual std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                        const StopCriteria& stop, uint64_t seed, uint32_t step,
                                        int max_total_sequence_length, const DecodeFunction& decode) = 0;
  virtual void end_generation() {}  // frees what generation held (the GPU KV cache)
  // Called after every batched pass of later generate() calls, with the call's progress (empty: none).
  virtual void set_generation_progress(GenerationProgressFn fn) = 0;
};

}  // namespace hone::roles
