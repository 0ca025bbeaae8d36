// The data-parallel optimizer's options that a learner's layout implies, written once over the backend for both
// engines (train/data_parallel_optimizer.h): the clipping norm over the model's shards and, under expert
// parallelism, where the experts' gradients are summed.
//   tp        the tensor-parallel group's norm: each value weighted by how many ranks hold it, summed over tp;
//   pp        the same weighting within the stage (the tensor-parallel group's, or the stage's own: a tied
//             embedding's two stage copies weighted 1/2), summed over tp and then over the stages;
//   ep        the stage's weighting (every dense value held by all ep ranks, weighted 1 / ep; each expert by one),
//             summed over tp and then over the expert-parallel group; the experts' gradients ([expert_begin,
//             num_params) of the flat buffer) summed over the expert-data-parallel group instead of dp.
// The engine builds the optimizer (its weights and communicators are its own) with these options.
#pragma once

#include "comm/comm.h"
#include "comm/parallel_state.h"
#include "parallel/shard_layout.h"
#include "parallel/tensor_parallel.h"
#include "train/data_parallel_optimizer.h"

namespace hone::rl {

// stage: this rank's shard (outlives the optimizer); tp: null at tp = 1; pipeline: pp > 1; expert_parallel: ep > 1,
// with edp the expert-data-parallel group's communicator (null: a group of one). x: where the norm's sums of squares
// run (the gradients' memory).
template <typename B>
DataParallelOptions learner_optimizer_options(const ShardLayout& stage, const ParallelState& ps,
                                              TensorParallelGroup<B>* tp, bool pipeline, bool expert_parallel,
                                              Comm* edp, const typename B::Exec& x, bool grad_reduce_in_fp32);

}  // namespace hone::rl
