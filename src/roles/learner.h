// The learner role: the policy being trained. It holds the fp32 master weights, the optimizer and its state, and
// the gradients; it gives the old policy's logprobs of the step's rollouts (before any update), trains on packed
// micro-batches (forward with entropy, the policy loss, backward), takes optimizer steps, and reads and writes the
// state a checkpoint holds. Its new weights reach the generator through the weight channel
// (roles/weight_channel.h). A loss other than GRPO's plugs in at train(): the micro-batches carry what the loss
// reads (rl/grpo_batch.h), the TrainLoss says which loss and its global denominators.
#pragma once

#include <vector>

#include "comm/comm.h"
#include "model/packed_batch.h"
#include "model/weights.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"
#include "roles/role_stats.h"
#include "tensor/tensor.h"

namespace hone::roles {

class Learner {
 public:
  virtual ~Learner() = default;

  // Collective over the data-parallel ranks, once, after every rank built its roles and before the first step:
  // the communicators and the data-parallel optimizer, whose fp32 master weights come from `initial` (the weights
  // the learner was built with).
  virtual void connect(const ModelWeights& initial) = 0;

  // The training weights' logprobs of every packed batch of a pass (0 where targets < 0), on every rank (under
  // pipeline parallelism one forward-only pass through the stages, broadcast from the last), written straight into
  // out[i] (resized to the batch's tokens; a null entry: not wanted, as an empty pass's). One copy from the
  // backend's memory to the host: the step's metrics (token_mult_prob_error, the KL) read them there, and the
  // training passes upload a micro-batch's T values once. forced_routing: empty, or one entry per batch (each may be
  // null): mixture of experts, each row's experts replayed (loss.router_replay).
  virtual void policy_logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                               const std::vector<const int32_t*>& forced_routing,
                               const std::vector<std::vector<float>*>& out) = 0;

  // One optimizer step's gradient: zeroes the gradients, then per micro-batch the forward (with entropy), the loss
  // with its global denominator and the backward, accumulating the gradients (on the GPU the last micro-batch's
  // backward reduces them over the data-parallel ranks while it runs). Returns each micro-batch's loss metrics in
  // order. An empty list only zeroes the gradients (the rank still joins optimizer_step()).
  virtual std::vector<PolicyLossMetrics> train(const std::vector<rl::MicroBatch>& micro_batches,
                                                   const rl::TrainLoss& loss) = 0;
  // Collective over the data-parallel ranks: reduce the gradients, clip to max_grad_norm (0: off), one AdamW update
  // with learning rate lr. Returns the global gradient norm before clipping. last_of_step: no other optimizer step
  // follows in this GRPO step, so the new weights reach the forward passes when the weight channel publishes them;
  // otherwise at once. Every rank passes the same value.
  virtual double optimizer_step(float lr, double max_grad_norm, bool last_of_step) = 0;
  virtual int optimizer_step_count() const = 0;

  // Expert parallelism: the ranks whose forward passes pair up one for one (a sparse layer's rows cross the
  // expert-parallel group in every pass); null otherwise. The step then runs as many passes on each of them, an
  // empty pass (rl::empty_pass_batch) where a rank has fewer micro-batches; train() pads its own.
  virtual Comm* lockstep_group() const { return nullptr; }
  // Mixture of experts: the routing statistics of the training passes since the last call (empty for a dense model).
  virtual MoeStepStats take_moe_stats() { return {}; }

  // ---- checkpoints (the dp-independent state: whole weights and moments, whatever the optimizer's sharding) ----
  // Collective over the data-parallel ranks: host copies of the fp32 master weights and the AdamW moments
  // ([num_params] f32 tensors, resized here) on data-parallel rank 0; the other ranks' outputs stay empty.
  virtual void read_state(ModelWeights& master, Tensor& exp_avg, Tensor& exp_avg_sq) = 0;
  // Collective: every rank passes the whole state. Replaces the weights (the generator's copy through the weight
  // channel), the moments and the optimizer step count.
  virtual void write_state(const ModelWeights& master, const float* exp_avg, const float* exp_avg_sq,
                           int step_count) = 0;
};

}  // namespace hone::roles
