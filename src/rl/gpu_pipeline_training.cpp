// The GPU policy engine's training pass under pipeline parallelism (rl/gpu_pipeline_training.h).
#include "rl/gpu_pipeline_training.h"

#if HONE_CUDA

#include "parallel/pipeline_simulation.h"
#include "rl/pipeline_broadcast.h"

namespace hone::rl {

std::vector<PolicyLossMetrics> train_pipeline(GpuPipelineModel& pipeline,
                                              PolicyLossPass<CudaBackend>& policy_loss,
                                              const std::vector<MicroBatch>& mbs, const TrainLoss& loss,
                                              bool entropy_grad, float* grads, GradReducer<CudaBackend>* reducer,
                                              Comm& pp, EngineStepStats& stats) {
  std::vector<const PackedBatch*> batches;
  for (const MicroBatch& mb : mbs) batches.push_back(&mb.batch);
  auto fn = [&](int i, const GpuTransformer& head) {
    const auto g = policy_loss.run(size_t(i), mbs[size_t(i)], loss, head.logprobs(), head.entropy());
    return GpuPipelineModel::LossGrads{g.dlogprob, entropy_grad ? g.dentropy : nullptr};
  };
  auto before_last = [&](GpuTransformer& x) {
    if (!reducer) return;
    reducer->attach(x);
    reducer->arm();
  };
  const PipelineRunStats r = pipeline.train(batches, loss.temperature, fn, grads, before_last);
  std::vector<PolicyLossMetrics> metrics(mbs.size());
  if (pipeline.last_stage()) metrics = policy_loss.metrics(mbs.size());
  broadcast_loss_metrics(pp, metrics, pp.size() - 1);
  const PipelineSimulation sim = simulate_pipeline(pipeline.last_schedule());
  stats.pipeline_passes += 1;
  stats.pipeline_microbatches += int(mbs.size());
  stats.pipeline_makespan += sim.makespan;
  stats.pipeline_busy += sim.busy;
  stats.pipeline_compute_s += r.compute_s;
  stats.pipeline_exchange_s += r.exchange_s;
  return metrics;
}

}  // namespace hone::rl

#endif  // HONE_CUDA
