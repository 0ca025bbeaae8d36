// ShardedAdamW<B>: the distributed optimizer (ZeRO-1, train.distributed_optimizer) over backend B and a Comm of the
// data-parallel group in B's memory (see train/data_parallel_optimizer.h).
//
// The flat fp32 gradient buffer (padded to a multiple of dp) is reduce-scattered bucket by bucket
// (train/zero_layout.h) IN PLACE: rank r's reduced chunk of bucket b stays where it lies in the buffer (the other
// chunks keep this rank's unreduced partial sums, which nothing reads). Each rank keeps fp32 master weights and
// Adam moments of its shard only; global norm = sqrt(sum over dp of the sums of squares of the reduced chunks,
// weighted under tensor or pipeline parallelism and summed over that group too); clipping; AdamW on the shard
// (1-D parameters undecayed, segments cut at the shard's edges). refit() casts the shard into its place in the
// compute weights (B::Act: fp32 on the CPU, bf16 on the GPU) and all-gathers them in place; the bucket holding the
// padding goes through a staging buffer. Per rank: 4 bytes of gradient per parameter, 12 bytes per parameter of
// the shard (master, two moments), and one bucket of bf16 staging when reducing in bf16.
//
// Checkpoints: read_state() gathers master weights and moments bucket by bucket to host memory (bounded staging);
// write_state() restores under any dp. shard_state() / load_shard_state() keep one rank's shard (same dp size).
#pragma once

#include <cstdint>

#include "train/data_parallel_optimizer.h"

namespace hone {

template <typename B>
class ShardedAdamW final : public DataParallelOptimizer<B> {
 public:
  using Act = typename B::Act;
  using Exec = typename B::Exec;
  using Work = CollectiveWork<B>;

  // initial: the host fp32 initial weights (the master shard is taken from them). dp and the Exec's context must
  // outlive the optimizer.
  ShardedAdamW(const ModelWeights& initial, AdamWConfig config, Comm& dp, DataParallelOptions options = {},
               Exec x = {});

  bool reduces() const override { return this->zl_.dp() > 1; }
  Work reduce_bucket(int b, const Exec& on) override;
  OptimizerStepResult update(float lr, double max_norm) override;
  void refit(Act* compute_weights) override;
  size_t device_bytes() const override { return this->common_bytes() + master_.bytes() + tail_.bytes(); }
  void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) override;
  void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                   int step_count) override;

  // Collective: the full fp32 master weights on every rank.
  void download_master(ModelWeights& w);
  ShardOptimizerState shard_state() const;
  void load_shard_state(const ShardOptimizerState& s);  // Error unless dp size, rank and parameter count match
  const std::vector<ShardSegment>& segments() const { return this->adamw_.segments(); }

 private:
  // Collective: the whole [num_params] buffer of a shard (master or a moment) into host `full` on root only (every
  // rank with root = -1).
  void gather_to_host(const float* shard, float* full, int root);
  void scatter_from_host(const float* full, float* shard);

  Comm& dp_;
  typename B::template Array<float> master_;  // [shard_size]
  typename B::template Array<Act> tail_;      // the bucket holding the padding, gathered here
};

}  // namespace hone
