// The GPU policy engine's training pass under pipeline parallelism (parallel.pp > 1; rl/gpu_policy_engine.cpp): one
// optimizer step's micro-batches through this rank's stage of the schedule (parallel/pipeline_model.h), the
// policy loss on the device of the last stage between each forward and backward, its metrics broadcast over the
// host pp group, and the pass's schedule counted in the step's pipeline statistics.
#pragma once

#if HONE_CUDA

#include <vector>

#include "comm/comm.h"
#include "parallel/pipeline_model.h"
#include "rl/grpo_batch.h"
#include "rl/policy_loss.h"
#include "rl/policy_loss_pass.h"
#include "roles/role_stats.h"
#include "train/grad_reducer.h"

namespace hone::rl {

// The micro-batches forward and backward, gradients accumulated into grads (device fp32, this stage's layout);
// entropy_grad: the entropy term's gradient goes into the backward too. reducer: the data-parallel reduction that
// overlaps this rank's last backward (armed on the model that runs it), or nullptr where the gradients are reduced
// in the optimizer step. Collective over pp (and tp). Returns every micro-batch's loss metrics, on every stage.
std::vector<PolicyLossMetrics> train_pipeline(GpuPipelineModel& pipeline,
                                              PolicyLossPass<CudaBackend>& policy_loss,
                                              const std::vector<MicroBatch>& mbs, const TrainLoss& loss,
                                              bool entropy_grad, float* grads, GradReducer<CudaBackend>* reducer,
                                              Comm& pp, EngineStepStats& stats);

}  // namespace hone::rl

#endif  // HONE_CUDA
