// The GPU policy engine's pieces for expert parallelism (parallel.ep > 1; rl/gpu_policy_engine.cpp): whether
// generation splits the experts, and its weights holding every expert, both decided by the device's free memory (the
// optimizer's options: rl/learner_optimizer.h; the checkpoint state: rl/learner_state.h).
#pragma once

#if HONE_CUDA

#include <memory>
#include <string>

#include "comm/nccl_comm.h"
#include "comm/parallel_state.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_layout.h"
#include "parallel/tensor_parallel.h"
#include "train/data_parallel_optimizer.h"

namespace hone::rl {

// generation.experts: whether generation keeps this rank's experts only, its passes in lockstep with the group's
// (parallel, or auto when a bf16 copy of every expert would take more than 80 % of the free memory now), rather
// than a replica of every expert (replicated, or auto when it fits). Collective over world under auto: every rank
// decides alike.
bool generation_splits_experts(const std::string& mode, const GpuExpertParallel& ep, Comm& world);

// Generation's bf16 buffer of every expert (filled by GpuExpertParallel::gather_experts at every refit). A user error
// when it cannot fit next to what the device holds already.
std::unique_ptr<DeviceArray<bf16>> every_expert_weights(const GpuExpertParallel& ep);

}  // namespace hone::rl

#endif  // HONE_CUDA
