// AllReduceAdamW<B>: the plain data-parallel optimizer over backend B (see train/data_parallel_optimizer.h).
// Gradients are all-reduced over the data-parallel Comm bucket by bucket (in fp32, or as bf16 with
// grad_reduce_in_fp32 = false), the experts' over their expert-data-parallel group; then every rank clips by the
// global norm and runs AdamW on the whole fp32 master weights. With no communicator (or one rank) nothing is
// reduced: one rank's AdamW. Master weights: a buffer of their own in B's memory, or, where the compute weights
// are fp32 (B::Act = float: the CPU), the compute weights themselves, updated in place (refit is then nothing).
#pragma once

#include <cstdint>
#include <type_traits>

#include "train/data_parallel_optimizer.h"

namespace hone {

template <typename B>
class AllReduceAdamW final : public DataParallelOptimizer<B> {
 public:
  using Act = typename B::Act;
  using Exec = typename B::Exec;
  using Work = CollectiveWork<B>;
  // Whether this backend's compute weights can be their own masters.
  static constexpr bool kWeightsAreMasters = std::is_same_v<Act, float>;

  // initial: the host fp32 initial weights (the master weights). dp: the data-parallel Comm in B's memory (a host
  // Comm on the CPU, a device one on the GPU), or null (one rank). weights: where kWeightsAreMasters, the compute
  // weights in B's memory (holding initial's values, or receiving them), updated in place; null otherwise: the
  // masters are a copy of their own. dp, options' Comms and the Exec's context must outlive the optimizer.
  AllReduceAdamW(const ModelWeights& initial, AdamWConfig config, Comm* dp, DataParallelOptions options = {},
                 Exec x = {}, Act* weights = nullptr);

  bool reduces() const override;
  Work reduce_bucket(int b, const Exec& on) override;
  OptimizerStepResult update(float lr, double max_norm) override;
  void refit(Act* compute_weights) override;
  size_t device_bytes() const override { return this->common_bytes() + own_master_.bytes(); }
  // Every rank holds the whole state: only the root copies it to the host (every rank with root = -1).
  void read_state(ModelWeights* master, float* exp_avg, float* exp_avg_sq, int root) override;
  void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                   int step_count) override;

  // The fp32 master weights and the moments, [num_params] in B's memory.
  float* master() const { return master_; }
  AdamW<B>& adamw() { return this->adamw_; }
  const AdamW<B>& adamw() const { return this->adamw_; }
  // The master weights into host fp32 weights (synchronizes).
  void download_master(ModelWeights& w) const;

 private:
  Comm* dp_;
  typename B::template Array<float> own_master_;
  float* master_ = nullptr;
};

}  // namespace hone
