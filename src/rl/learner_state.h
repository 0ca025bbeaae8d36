// The learner's checkpoint state, written once over the backend for both engines (roles::Learner::read_state and
// write_state): checkpoints hold whole tensors whatever the layout, so reading gathers this rank's shard of the fp32
// master weights and Adam moments onto world rank 0 (over the host tp and pp groups, and the expert-parallel group
// first under parallel.ep), and writing hands the optimizer this rank's slices of the whole state. The optimizer
// (train/data_parallel_optimizer.h) reads and writes its own sharding over dp (ZeRO-1 included).
#pragma once

#include "comm/parallel_state.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_layout.h"
#include "tensor/tensor.h"
#include "train/data_parallel_optimizer.h"

namespace hone::rl {

// Collective over the optimizer's group (dp, or dp x cp), then tp and pp (ep under expert parallelism): the whole
// state on world rank 0 (master, m and v allocated there; untouched elsewhere). stage: this rank's shard of its
// stage; sharded: tp > 1 or pp > 1 (stage is then a slice of the model); ep: the expert-parallel group (null: none),
// under which stage holds this rank's experts. dp_root: this rank is rank 0 of the optimizer's group.
template <typename B>
void read_learner_state(const ModelConfig& mc, const ParallelState& ps, const ShardLayout& stage, bool sharded,
                        ExpertParallelGroup<B>* ep, bool dp_root, DataParallelOptimizer<B>& optimizer,
                        ModelWeights& master, Tensor& m, Tensor& v);

// Every rank passes the whole state: this rank's slices of it (the whole state when nothing is sharded) into the
// optimizer, with its step count. The compute weights need the optimizer's refit() after it.
template <typename B>
void write_learner_state(const ModelConfig& mc, const ShardLayout& stage, bool sharded,
                         DataParallelOptimizer<B>& optimizer, const ModelWeights& master, const float* m,
                         const float* v, int step_count);

}  // namespace hone::rl
