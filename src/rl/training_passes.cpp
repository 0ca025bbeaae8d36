// One optimizer step's training passes over the backend (what they do and why: training_passes.h).
#include "rl/training_passes.h"

#include <cmath>
#include <utility>

#include "comm/host_collectives.h"
#include "model/moe_feed_forward.h"
#include "parallel/pipeline_simulation.h"
#include "rl/moe_metrics.h"
#include "rl/pipeline_broadcast.h"

namespace hone::rl {

// ---- the routing tables ----

template <typename B>
const int32_t* MoeRoutingTables<B>::upload(const int32_t* host, int T) {
  if (!host) return nullptr;
  const int64_t n = entries(T);
  if (forced_.size() < n) forced_ = typename B::template Array<int32_t>(n, "replayed routing");
  B::upload(x_, forced_.get(), host, size_t(n) * sizeof(int32_t));
  B::sync(x_);
  return forced_.get();
}

template <typename B>
int32_t* MoeRoutingTables<B>::record(int T) {
  const int64_t n = entries(T);
  if (recorded_.size() < n) recorded_ = typename B::template Array<int32_t>(n, "training routing");
  return recorded_.get();
}

template <typename B>
std::vector<int32_t> MoeRoutingTables<B>::recorded(int T) {
  std::vector<int32_t> out(size_t(entries(T)));
  B::download(x_, out.data(), recorded_.get(), out.size() * sizeof(int32_t));
  B::sync(x_);
  return out;
}

// ---- the passes ----

template <typename B>
MoeRouting TrainingPasses<B>::before_forward(TransformerModel<B>& model, const MicroBatch& mb, const TrainLoss& loss,
                                             bool always_unreplayed) {
  const int T = mb.batch.num_tokens();
  const bool replay = router_replay_ && !mb.gen_routing.empty();
  if (replay || always_unreplayed) {  // the mismatch without replay, for the record: a forward that routes by itself
    model.forward(mb.batch, loss.temperature, /*need_entropy=*/false, /*need_backward=*/true);
    if (replay) {
      const std::vector<float> lp = model.logprobs_host();
      for (int t = 0; t < T; ++t)
        if (mb.mask[size_t(t)]) {
          stats_.unreplayed_mpe_sum += std::exp(std::fabs(double(mb.gen[size_t(t)]) - lp[size_t(t)]));
          ++stats_.unreplayed_tokens;
        }
    }
  }
  MoeRouting r;
  r.aux_loss_weight = loss.total_tokens > 0 ? loss.moe_aux_loss_coef * double(T) / loss.total_tokens : 0;
  r.forced = replay ? tables_.upload(mb.gen_routing.data(), T) : nullptr;
  r.record = mb.gen_routing.empty() ? nullptr : tables_.record(T);  // compared with generation's
  return r;
}

template <typename B>
void TrainingPasses<B>::after_forward(const MoeFeedForward<B>& moe, const MicroBatch& mb, bool recorded) {
  const int S = moe.num_sparse_layers(), E = c_.num_experts, k = c_.num_experts_per_tok, T = mb.batch.num_tokens();
  const std::vector<int32_t> loads = moe.expert_counts(x_);
  const std::vector<int64_t> counts(loads.begin(), loads.end());
  std::vector<int32_t> mine;
  if (recorded && mb.routing_width == S * k) mine = tables_.recorded(T);
  add_moe_routing(stats_, S, E, k, counts, moe.aux_loss(x_), mine, mb);
}

template <typename B>
std::vector<PolicyLossMetrics> TrainingPasses<B>::run(TransformerModel<B>& model, PolicyLossPass<B>& loss_pass,
                                                      const std::vector<MicroBatch>& mbs, const TrainLoss& loss,
                                                      float* grads, const TrainingPassHooks& hooks) {
  const bool entropy_grad = loss.config.entropy_coef != 0;
  MoeFeedForward<B>* moe = model.moe();
  const int64_t n = int64_t(mbs.size());
  const int64_t passes = lockstep_ ? all_reduce_max_value(*lockstep_, n) : n;
  const bool lockstep_unreplayed = lockstep_ && moe && router_replay_;
  // The empty passes first, so that the step's last backward (which an overlapped reduction arms on) is a real one
  // wherever this rank has a micro-batch.
  for (int64_t i = n; i < passes; ++i) {
    const PackedBatch empty = empty_pass_batch();
    if (lockstep_unreplayed) model.forward(empty, loss.temperature, /*need_entropy=*/false, /*need_backward=*/true);
    model.forward(empty, loss.temperature, /*need_entropy=*/false, /*need_backward=*/true);
    if (n == 0 && i + 1 == passes && hooks.before_last_backward) hooks.before_last_backward();
    model.backward_host(std::vector<float>(size_t(empty.num_tokens()), 0.f), nullptr, grads);
  }
  if (hooks.progress) events_.start();
  for (int64_t i = 0; i < n; ++i) {
    const MicroBatch& mb = mbs[size_t(i)];
    const MoeRouting r = moe ? before_forward(model, mb, loss, lockstep_unreplayed) : MoeRouting{};
    model.forward(mb.batch, loss.temperature, /*need_entropy=*/true, /*need_backward=*/true, /*input=*/nullptr, r);
    if (moe) after_forward(*moe, mb, r.record != nullptr);
    const auto g = loss_pass.run(size_t(i), mb, loss, model.logprobs(), model.entropy());
    if (i + 1 == n && hooks.before_last_backward) hooks.before_last_backward();
    model.backward(g.dlogprob, entropy_grad ? g.dentropy : nullptr, grads);
    if (hooks.after_pass) hooks.after_pass(i);
    if (hooks.progress) {
      events_.recorded(i, x_);
      hooks.progress(events_.finished());
    }
  }
  std::vector<PolicyLossMetrics> metrics = loss_pass.metrics(mbs.size());  // waits for the backend's stream
  if (hooks.progress) hooks.progress(n);
  return metrics;
}

template <typename B>
MoeStepStats TrainingPasses<B>::take_moe_stats() {
  return std::exchange(stats_, MoeStepStats{});
}

// ---- pipeline parallelism ----

template <typename B>
std::vector<PolicyLossMetrics> train_pipeline(PipelineStage<B>& pipeline, PolicyLossPass<B>& policy_loss,
                                              const std::vector<MicroBatch>& mbs, const TrainLoss& loss,
                                              bool entropy_grad, float* grads, GradReducer<B>* reducer, Comm& pp,
                                              EngineStepStats& stats) {
  std::vector<const PackedBatch*> batches;
  for (const MicroBatch& mb : mbs) batches.push_back(&mb.batch);
  auto fn = [&](int i, const TransformerModel<B>& head) {
    const auto g = policy_loss.run(size_t(i), mbs[size_t(i)], loss, head.logprobs(), head.entropy());
    return typename PipelineStage<B>::LossGrads{g.dlogprob, entropy_grad ? g.dentropy : nullptr};
  };
  typename PipelineStage<B>::BeforeLastBackward before_last;
  if (reducer)
    before_last = [reducer](TransformerModel<B>& x) {
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

template <typename B>
void pipeline_logprobs(PipelineStage<B>& pipeline, const std::vector<const PackedBatch*>& batches, float temperature,
                       Comm& pp, const std::vector<std::vector<float>*>& out) {
  std::vector<std::vector<float>> lp;
  pipeline.logprobs(batches, temperature, lp);
  std::vector<int> sizes;
  for (const PackedBatch* b : batches) sizes.push_back(b->num_tokens());
  broadcast_logprobs(pp, lp, sizes, pp.size() - 1);
  for (size_t i = 0; i < out.size() && i < lp.size(); ++i)
    if (out[i]) out[i]->swap(lp[i]);
}

#define HONE_INSTANTIATE_TRAINING_PASSES(B)                                                                     \
  template class MoeRoutingTables<B>;                                                                          \
  template class TrainingPasses<B>;                                                                            \
  template std::vector<PolicyLossMetrics> train_pipeline<B>(PipelineStage<B>&, PolicyLossPass<B>&,             \
                                                            const std::vector<MicroBatch>&, const TrainLoss&,  \
                                                            bool, float*, GradReducer<B>*, Comm&,              \
                                                            EngineStepStats&);          \
  template void pipeline_logprobs<B>(PipelineStage<B>&, const std::vector<const PackedBatch*>&, float, Comm&,  \
                                     const std::vector<std::vector<float>*>&);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_TRAINING_PASSES)
#undef HONE_INSTANTIATE_TRAINING_PASSES

}  // namespace hone::rl
