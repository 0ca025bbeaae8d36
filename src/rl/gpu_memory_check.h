// The GPU policy engine's memory check before it allocates its optimizer: the device memory plan
// (rl/device_memory_plan.h) of this rank's shard, phases and activations against what the device has free.
#pragma once

#if HONE_CUDA

#include <string>

#include "comm/parallel_state.h"
#include "model/transformer.h"
#include "model/model_config.h"
#include "parallel/generation_layout.h"
#include "parallel/pipeline_model.h"
#include "parallel/pipeline_layout.h"
#include "rl/grpo_settings.h"

namespace hone::rl {

// A run whose optimizer state, gradients and largest phase cannot fit next to the weights ends now, on this rank
// (the runtime ends the others), with the numbers and the keys to change: a UserError naming `device`. ranks: the
// optimizer's group; distributed: ZeRO-1 over it. The activations come from the pipeline stage when there is one,
// else from the policy model.
void check_gpu_memory_fits(const GrpoSettings& s, const ModelConfig& mc, const ParallelState& ps,
                           const PipelineLayout& pipe, const GenerationLayout& gen, int ranks, bool distributed,
                           const GpuTransformer* policy, const GpuPipelineModel* pipeline, const std::string& device,
                           bool expert_replica = false);

}  // namespace hone::rl

#endif  // HONE_CUDA
