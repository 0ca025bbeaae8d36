// The policy loss of the GPU engine's training micro-batches, on the device (cuda::policy_loss_forward /
// _backward): a micro-batch's host arrays (mask, sequence offsets, advantages, generation / old / reference
// logprobs) go up once, the new logprobs and entropies are read where the forward wrote them, the gradients stay on
// the device for the backward, and each micro-batch's block of partial sums comes back asynchronously into pinned
// host memory, read once after the step's last micro-batch. Everything runs on the context's stream, so one set of
// buffers serves all micro-batches in turn.
#pragma once

#if HONE_CUDA

#include <cstddef>
#include <vector>

#include "cuda/device_memory.h"
#include "cuda/ops_cuda.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"

namespace hone::rl {

class GpuPolicyLoss {
 public:
  explicit GpuPolicyLoss(const cuda::GpuContext& ctx) : ctx_(ctx) {}
  ~GpuPolicyLoss();
  GpuPolicyLoss(const GpuPolicyLoss&) = delete;
  GpuPolicyLoss& operator=(const GpuPolicyLoss&) = delete;

  // Before a step's micro-batches (no earlier work of this object may be in flight: metrics() was called): room
  // for the largest of them and a block of statistics for each.
  void reserve(const std::vector<MicroBatch>& micro_batches);

  // Queues micro-batch i's loss (forward: its statistics; backward: the gradients) on the stream. new_lp and
  // entropy: the forward's device [T] outputs. Returns device gradients, valid until the next run(); dentropy is
  // null when loss.config.entropy_coef == 0.
  struct Gradients {
    const float* dlogprob;
    const float* dentropy;
  };
  Gradients run(size_t i, const MicroBatch& mb, const TrainLoss& loss, const float* new_lp, const float* entropy);

  // Synchronizes the stream and returns the metrics of micro-batches 0..n-1 in order. A loss that is not finite
  // (a NaN logprob on a trained token) is an error, as on the CPU.
  std::vector<PolicyLossMetrics> metrics(size_t n);

  void release();  // frees the device buffers (generation takes the memory)
  size_t device_bytes() const { return device_.bytes(); }

 private:
  const cuda::GpuContext ctx_;
  DeviceArray<char> device_;  // the carved arrays below
  int max_tokens_ = 0, max_seqs_ = 0;
  double* d_stats_ = nullptr;
  int64_t* d_offsets_ = nullptr;
  float *d_gen_ = nullptr, *d_old_ = nullptr, *d_ref_ = nullptr, *d_adv_ = nullptr;
  float *d_dlogprob_ = nullptr, *d_dentropy_ = nullptr;
  uint8_t* d_mask_ = nullptr;
  double* h_stats_ = nullptr;  // pinned, blocks_ blocks of PolicyLossStat::count
  size_t blocks_ = 0;
};

}  // namespace hone::rl

#endif  // HONE_CUDA
