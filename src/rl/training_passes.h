// One optimizer step's training passes (roles::Learner::train), written once over the backend B for the engines the
// roles run on: each micro-batch's forward (with entropy), the policy loss on the backend's arrays between the
// forward and its backward (rl/policy_loss_pass.h), the backward accumulating into the gradients.
//   expert parallelism  every forward and backward is collective over the group, so every rank runs as many
//                       passes: empty ones (rl::empty_pass_batch) first where it has fewer micro-batches;
//   mixture of experts  each forward gets its routing as an argument (MoeRouting: the load-balancing loss's share,
//                       generation's experts replayed under loss.router_replay, the table it records its own into),
//                       from tables in the backend's memory (MoeRoutingTables); under replay each pass first runs a
//                       forward that routes by itself, for the mismatch replay hides (the empty passes too, so that
//                       the group's collectives pair up); the routing goes into the step's statistics;
//   pipeline            the stage's schedule (train_pipeline), the loss on the last stage, its metrics broadcast;
//                       the logprob passes through the stages (pipeline_logprobs).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/comm.h"
#include "model/model_config.h"
#include "backend/pass_events.h"
#include "model/transformer.h"
#include "parallel/pipeline_model.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"
#include "rl/policy_loss_pass.h"
#include "roles/role_stats.h"
#include "train/grad_reducer.h"

namespace hone::rl {

// A mixture of experts' routing tables in the backend's memory, [T x sparse layers x k]: generation's routing
// uploaded for replay, and the table a training forward records its experts into.
template <typename B>
class MoeRoutingTables {
 public:
  using Exec = typename B::Exec;
  MoeRoutingTables(const ModelConfig& c, const Exec& x) : c_(c), x_(x) {}
  // host in the backend's memory (null stays null); waits for the copy, so the host table may change after the call.
  const int32_t* upload(const int32_t* host, int T);
  int32_t* record(int T);                 // the table of T rows a forward records into
  std::vector<int32_t> recorded(int T);   // its first T rows on the host (waits for the stream)

 private:
  int64_t entries(int T) const { return int64_t(T) * c_.num_moe_layers() * c_.num_experts_per_tok; }
  ModelConfig c_;
  Exec x_;
  typename B::template Array<int32_t> forced_, recorded_;
};

// What an engine does around the passes (each may be empty).
struct TrainingPassHooks {
  std::function<void()> before_last_backward;  // the step's last backward comes next (an overlapped reduction arms)
  std::function<void(int64_t i)> after_pass;   // micro-batch i's backward is queued
  // The progress line: how many of the call's micro-batches the backend has finished (backend/pass_events.h: on a
  // GPU what the device has done, not what the host has queued), after each pass and once all are done.
  std::function<void(int64_t done)> progress;
};

template <typename B>
class TrainingPasses {
 public:
  using Exec = typename B::Exec;
  // lockstep: the expert-parallel group whose passes pair up (null: none). router_replay: loss.router_replay.
  TrainingPasses(const ModelConfig& c, const Exec& x, Comm* lockstep, bool router_replay)
      : c_(c), x_(x), lockstep_(lockstep), router_replay_(router_replay), tables_(c, x) {}

  // The micro-batches' passes through model (the whole model or this rank's shard of it: pp = 1), gradients
  // accumulated into grads (fp32, the model's layout, in the backend's memory). Returns each micro-batch's loss
  // metrics (waits for them).
  std::vector<PolicyLossMetrics> run(TransformerModel<B>& model, PolicyLossPass<B>& loss_pass,
                                     const std::vector<MicroBatch>& mbs, const TrainLoss& loss, float* grads,
                                     const TrainingPassHooks& hooks = {});
  // The routing argument of a logprob pass replaying forced (host [T x sparse layers x k]; null: none).
  MoeRouting logprob_routing(const int32_t* forced, int T) {
    MoeRouting r;
    r.forced = tables_.upload(forced, T);
    return r;
  }
  // The routing statistics of the training passes since the last call.
  MoeStepStats take_moe_stats();

 private:
  MoeRouting before_forward(TransformerModel<B>& model, const MicroBatch& mb, const TrainLoss& loss,
                            bool always_unreplayed);
  void after_forward(const MoeFeedForward<B>& moe, const MicroBatch& mb, bool recorded);

  ModelConfig c_;
  Exec x_;
  Comm* lockstep_ = nullptr;
  bool router_replay_ = false;
  MoeRoutingTables<B> tables_;
  MoeStepStats stats_;
  PassEvents<B> events_;  // the progress line's count
};

// Under pipeline parallelism: the micro-batches through this rank's stage of the schedule (parallel/pipeline_model.h),
// gradients accumulated into grads (fp32, this stage's layout, the backend's memory); entropy_grad: the entropy
// term's gradient goes into the backward too. reducer: the data-parallel reduction that overlaps this rank's last
// backward (armed on the model that runs it), or null where the gradients are reduced in the optimizer step.
// Collective over pp (and tp). Returns every micro-batch's loss metrics, on every stage, and counts the pass's
// schedule in the step's pipeline statistics.
template <typename B>
std::vector<PolicyLossMetrics> train_pipeline(PipelineStage<B>& pipeline, PolicyLossPass<B>& policy_loss,
                                              const std::vector<MicroBatch>& mbs, const TrainLoss& loss,
                                              bool entropy_grad, float* grads, GradReducer<B>* reducer, Comm& pp,
                                              EngineStepStats& stats);

// Under pipeline parallelism, the logprob passes: the batches forward only through this rank's stage of the
// schedule, the last stage's logprobs broadcast over pp and written into out (as roles::Learner::policy_logprobs:
// resized to each batch; a null entry is not wanted). Collective over pp (and tp).
template <typename B>
void pipeline_logprobs(PipelineStage<B>& pipeline, const std::vector<const PackedBatch*>& batches, float temperature,
                       Comm& pp, const std::vector<std::vector<float>*>& out);

}  // namespace hone::rl
