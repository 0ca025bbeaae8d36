// The policy loss of an optimizer step's training micro-batches, written once over a backend B: both engines run it
// between each micro-batch's forward and backward. A micro-batch's host arrays (mask, sequence offsets, advantages,
// generation / old / reference logprobs) go into the backend's memory once, the new logprobs and entropies are read
// where the forward wrote them, the op runs through the backend's op table (B::policy_loss_forward / _backward:
// cpu::policy_loss_* on the CPU, cuda/policy_loss.cu on a GPU), the gradients stay in the backend's memory for the
// backward, and each micro-batch's block of partial sums is copied into host staging memory (pinned on a GPU:
// asynchronous), read once after the step's last micro-batch. Everything is ordered on the backend's stream, so one
// set of buffers serves all micro-batches in turn. The deck's names, the metrics and the denominators are
// rl/policy_loss.h's.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"

namespace hone::rl {

template <typename B>
class PolicyLossPass {
 public:
  explicit PolicyLossPass(typename B::Exec exec = {}) : exec_(exec) {}
  PolicyLossPass(const PolicyLossPass&) = delete;
  PolicyLossPass& operator=(const PolicyLossPass&) = delete;

  // Before a step's micro-batches (no earlier work of this object may be in flight: metrics() was called): room
  // for the largest of them and a block of statistics for each.
  void reserve(const std::vector<MicroBatch>& micro_batches);

  // Queues micro-batch i's loss (forward: its statistics; backward: the gradients). new_lp and entropy: the
  // forward's [T] outputs in the backend's memory. Returns the gradients in the backend's memory, valid until the
  // next run(); dentropy is null when loss.config.entropy_coef == 0.
  struct Gradients {
    const float* dlogprob;
    const float* dentropy;
  };
  Gradients run(size_t i, const MicroBatch& mb, const TrainLoss& loss, const float* new_lp, const float* entropy);

  // Waits for the backend's stream and returns the metrics of micro-batches 0..n-1 in order. A loss that is not
  // finite (a NaN logprob on a trained token) is a user error naming the likely keys.
  std::vector<PolicyLossMetrics> metrics(size_t n);

  void release();  // frees the buffers (on a GPU, generation takes the memory)
  size_t bytes() const { return buffers_.bytes(); }  // of the buffers in the backend's memory

 private:
  using Buffers = typename B::template Array<char>;
  using Stats = typename B::template HostStaging<double>;

  const typename B::Exec exec_;
  Buffers buffers_;  // the carved arrays below
  int max_tokens_ = 0, max_seqs_ = 0;
  double* stats_ = nullptr;
  int64_t* offsets_ = nullptr;
  float *gen_ = nullptr, *old_ = nullptr, *ref_ = nullptr, *adv_ = nullptr;
  float *dlogprob_ = nullptr, *dentropy_ = nullptr;
  uint8_t* mask_ = nullptr;
  Stats host_stats_;  // blocks_ blocks of PolicyLossStat::count
  size_t blocks_ = 0;
};

}  // namespace hone::rl
