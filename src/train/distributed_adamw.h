// Data-parallel optimizers on the CPU, over a host Comm of the data-parallel group (an MpiComm):
//
//   DistributedAdamW  ZeRO-1: gradients reduce-scattered (train.distributed_optimizer = true); each rank keeps fp32
//                     master weights and Adam moments of its shard only (train/zero_layout.h: the flat buffer
//                     padded to a multiple of dp, one contiguous shard per rank); global gradient norm =
//                     sqrt(all_reduce(sum of squares of the shard)); clipping; AdamW on the shard with AdamW's decay
//                     rule (1-D parameters undecayed; segments cut at the shard's edges); all-gather of the updated
//                     fp32 weights into every rank's ModelWeights.
//   DataParallelAdamW the plain variant: all-reduce of the gradients, then clipping and the usual AdamW on every
//                     rank (every rank holds the whole optimizer state).
//
// Both sum gradients over the ranks (each rank's loss is already divided by the global denominator). With
// grad_reduce_in_fp32 = false (train.grad_reduce_in_fp32) the gradients travel as bf16: converted, reduced (sums
// formed in fp32, rounded once), converted back.
//
// Checkpoints (decision): full_state() gathers the dp-independent state (exp_avg, exp_avg_sq over the whole flat
// buffer, as AdamW's; the master weights are the all-gathered weights themselves), so a checkpoint written by rank
// 0 restores under any number of ranks with load_full_state(). shard_state()/load_shard_state() keep or restore
// one rank's shard alone (same dp size and rank; no communication), for in-memory saves.
#pragma once

#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "model/weights.h"
#include "train/adamw.h"
#include "train/grad_clip.h"
#include "train/zero_layout.h"

namespace hone {

// A step whose global gradient norm is not finite (NaN or Inf anywhere, on any rank) is skipped, as Megatron does:
// weights, moments and the step count stay as they were; every rank sees the same norm, so every rank skips.
struct OptimizerStepResult {
  double grad_norm = 0;  // global, before clipping
  float clip_coef = 1.f;
  bool skipped = false;  // the norm was not finite: nothing was updated
};

// The optimizer state over the whole flat buffer (what AdamW holds), for checkpoints.
struct FullOptimizerState {
  int step = 0;
  std::vector<float> exp_avg, exp_avg_sq;  // [num_params]
};

// One rank's shard.
struct ShardOptimizerState {
  int dp_size = 1, dp_rank = 0, step = 0;
  int64_t num_params = 0;
  std::vector<float> master, exp_avg, exp_avg_sq;  // [shard_size]
};

class DistributedAdamW {
 public:
  // The master shard is copied from weights; moments start at zero. dp must outlive the optimizer.
  // norm: how the gradient norm spans a sharded model (tensor parallelism; default: the whole model).
  DistributedAdamW(const ModelWeights& weights, AdamWConfig config, Comm& dp, bool grad_reduce_in_fp32 = true,
                   ShardedNorm norm = {});

  // Collective over dp: reduce-scatter grads, clip by the global norm (max_grad_norm <= 0: no clipping), AdamW on
  // the shard (step count incremented first), all-gather into weights.flat. grads is read only.
  OptimizerStepResult step(ModelWeights& weights, const ModelWeights& grads, float lr, double max_grad_norm);

  const ZeroLayout& layout() const { return layout_; }
  // This rank's shard of the last step's reduced gradients (before clipping).
  const std::vector<float>& reduced_grad_shard() const { return reduced_; }
  int step_count() const { return step_; }
  void set_step_count(int s) { step_ = s; }

  FullOptimizerState full_state() const;  // collective over dp; every rank gets it
  // Not collective: every rank passes the same full state and weights (the master shard is taken from weights).
  void load_full_state(const FullOptimizerState& s, const ModelWeights& weights);
  ShardOptimizerState shard_state() const;
  void load_shard_state(const ShardOptimizerState& s);  // Error unless dp size, rank and parameter count match

 private:
  std::vector<float> gather(const std::vector<float>& shard) const;  // [num_params]

  Comm& dp_;
  AdamWConfig config_;
  bool fp32_;
  ShardedNorm norm_;
  ZeroLayout layout_;
  std::vector<ShardSegment> segments_;
  std::vector<float> master_, m_, v_, reduced_;
  std::vector<float> padded_;  // [padded_size] staging for the reduce-scatter and all-gather
  int step_ = 0;
};

// Expert parallelism: the flat buffer's experts, [begin, num_params), are this rank's and their gradients are
// summed over the expert-data-parallel group (the ranks holding the same experts) instead of dp. Default: none.
struct ExpertRegion {
  int64_t begin = 0;
  Comm* edp = nullptr;
};

class DataParallelAdamW {
 public:
  DataParallelAdamW(const ModelWeights& weights, AdamWConfig config, Comm& dp, bool grad_reduce_in_fp32 = true,
                    ShardedNorm norm = {}, ExpertRegion experts = {});

  // Collective over dp: all-reduces grads in place (grads then holds the global gradient, clipped; the experts'
  // over their group), clips, AdamW.
  OptimizerStepResult step(ModelWeights& weights, ModelWeights& grads, float lr, double max_grad_norm);

  AdamW& adamw() { return adamw_; }
  const AdamW& adamw() const { return adamw_; }

 private:
  Comm& dp_;
  bool fp32_;
  ShardedNorm norm_;
  ExpertRegion experts_;
  AdamW adamw_;
};

// Sums x[n] over comm in place, as fp32 or through bf16 (converted, reduced, converted back); on one rank nothing.
void all_reduce_gradients(Comm& comm, float* x, int64_t n, bool in_fp32);

}  // namespace hone
