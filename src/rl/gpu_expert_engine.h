// The GPU policy engine's pieces for expert parallelism (parallel.ep > 1; rl/gpu_policy_engine.cpp): generation's
// weights holding every expert, the optimizer's clipping norm and expert-data-parallel group, and the checkpoint
// state gathered from the expert-parallel ranks.
#pragma once

#if HONE_CUDA

#include <memory>

#include "comm/nccl_comm.h"
#include "comm/parallel_state.h"
#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/gpu_expert_parallel.h"
#include "parallel/gpu_tensor_parallel.h"
#include "parallel/shard_layout.h"
#include "train/gpu_data_parallel_optimizer.h"

namespace hone::rl {

// Generation's bf16 buffer of every expert (filled by GpuExpertParallel::gather_experts at every refit). A user error
// when it cannot fit next to what the device holds already.
std::unique_ptr<DeviceArray<bf16>> every_expert_weights(const GpuExpertParallel& ep);

// The optimizer's options under expert parallelism: the clipping norm over the tensor- and expert-parallel ranks
// (dense values weighted 1 / ep by the layout, each expert counted once) and the experts' gradients summed over the
// expert-data-parallel group (its communicator made here, collective over the world, kept in edp_comm).
void set_expert_parallel_options(GpuDataParallelOptions& po, const ShardLayout& stage, const ParallelState& ps,
                                 GpuTensorParallel* tp, double nccl_timeout_s, const cuda::GpuContext& ctx,
                                 std::unique_ptr<NcclComm>& edp_comm);

// read_state under expert parallelism: every rank downloads its part, the experts are all-gathered over the host ep
// group (the whole tp shard on every ep rank), then the dp-rank-0 ranks gather the shards over tp onto world rank 0.
void read_expert_parallel_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage,
                                GpuExpertParallel& ep, GpuDataParallelOptimizer& optimizer, ModelWeights& master,
                                Tensor& m, Tensor& v);

}  // namespace hone::rl

#endif  // HONE_CUDA
