// The GPU policy engine's checkpoint state (rl/gpu_policy_engine.cpp): checkpoints hold whole tensors whatever the
// layout, so reading gathers this rank's shard of the fp32 master weights and Adam moments onto world rank 0 (over
// the host tp and pp groups, and the expert-parallel group first under parallel.ep), and writing hands the optimizer
// this rank's slices of the whole state.
#pragma once

#if HONE_CUDA

#include "comm/parallel_state.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_layout.h"
#include "train/data_parallel_optimizer.h"

namespace hone::rl {

// Under tensor or pipeline parallelism: the ranks of dp rank 0 of the optimizer's group (dp_root) download their
// stage's shard, gathered onto world rank 0 (master, m, v allocated there; untouched elsewhere).
void read_sharded_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage, bool dp_root,
                        DataParallelOptimizer<CudaBackend>& optimizer, ModelWeights& master, Tensor& m,
                        Tensor& v);

// Under expert parallelism: every rank downloads its part, the experts are all-gathered over the host ep group (the
// whole tp shard on every ep rank), then the dp-rank-0 ranks gather the shards over tp onto world rank 0.
void read_expert_parallel_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage,
                                GpuExpertParallel& ep, DataParallelOptimizer<CudaBackend>& optimizer,
                                ModelWeights& master, Tensor& m, Tensor& v);

// This rank's slices of the whole state (master, m, v) into the optimizer of a sharded layout.
void write_sharded_state(const ModelConfig& mc, const ShardLayout& stage,
                         DataParallelOptimizer<CudaBackend>& optimizer, const ModelWeights& master, const float* m,
                         const float* v, int step_count);

}  // namespace hone::rl

#endif  // HONE_CUDA
