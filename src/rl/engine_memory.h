// The colocated engine's checks of its device's memory (rl/colocated_engine.cpp), against what the device has free
// (EngineDevice<B>::free_bytes: the driver's count on a GPU, unbounded on the CPU, whose host memory plan is checked
// before the engine exists): the device memory plan (rl/device_memory_plan.h) of this rank's shard, phases and
// activations, and whether generation can hold a copy of every expert.
#pragma once

#include <string>

#include "comm/parallel_state.h"
#include "model/model_config.h"
#include "parallel/generation_layout.h"
#include "parallel/pipeline_layout.h"
#include "rl/grpo_settings.h"

namespace hone {
template <typename B>
class TransformerModel;
template <typename B>
class PipelineStage;
}  // namespace hone

namespace hone::rl {

// A run whose optimizer state, gradients and largest phase cannot fit in free_bytes next to the weights ends now,
// on this rank (the runtime ends the others), with the numbers and the keys to change: a UserError naming `device`.
// ranks: the optimizer's group; distributed: ZeRO-1 over it. The activations come from the pipeline stage when
// there is one, else from the policy model. Nothing to check when free_bytes is unbounded.
template <typename B>
void check_memory_fits(const GrpoSettings& s, const ModelConfig& mc, const ParallelState& ps,
                       const PipelineLayout& pipe, const GenerationLayout& gen, int ranks, bool distributed,
                       const TransformerModel<B>* policy, const PipelineStage<B>* pipeline, const std::string& device,
                       double free_bytes, bool expert_replica = false);

// generation.experts: whether generation keeps this rank's experts only, its passes in lockstep with the group's
// (parallel, or auto when a copy of every expert, every_expert_bytes, would take more than 80 % of the free memory
// now), rather than a replica of every expert (replicated, or auto when it fits). Collective over world under auto:
// every rank decides alike.
bool generation_splits_experts(const std::string& mode, double every_expert_bytes, double free_bytes, Comm& world);

// generation.experts = replicated: a UserError when the copy of every expert cannot fit next to what the device
// holds already.
void check_every_expert_fits(int ep, double every_expert_bytes, double free_bytes);

}  // namespace hone::rl
