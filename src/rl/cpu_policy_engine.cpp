// The CPU policy engine: fp32 weights in three roles (training = master, generation copy refitted every step,
// frozen reference when the KL term needs it), the hand-written Transformer and CpuGenerator; the data-parallel
// optimizer over the dp group's MpiComm (train/data_parallel_optimizer.h): AllReduceAdamW (gradients all-reduced,
// whole AdamW state on every rank, the training weights updated in place as their own masters) or, with
// train.distributed_optimizer and more than one rank, ShardedAdamW (ZeRO-1: gradients reduce-scattered, master
// weights and moments sharded, weights all-gathered). The gradients are the optimizer's buffer (grads_ views it).
// Under tensor parallelism (parallel.tp > 1) every role holds this rank's shard (parallel/shard_weights.h), the
// models and the generator compute over the tp group (parallel/tensor_parallel.h), the optimizer works on the
// shard's flat buffer over dp with the gradient norm spanning the group, and checkpoints stay whole: read_state
// gathers the shards onto world rank 0, write_state takes this rank's slices of the whole state.
// Under context parallelism (parallel.cp > 1) the models split every micro-batch over the cp group
// (parallel/context_parallel.h: each rank runs its rows, attention by the ring) and every rank gets all the rows'
// logprobs, so the loss is computed whole; the ranks of a cp group hold the same weights and see other tokens, so the
// optimizer sums the gradients over dp x cp (ParallelState::dp_cp(), ZeRO-1 included) instead of dp.
// Under pipeline parallelism (parallel.pp > 1) the training and reference roles hold this rank's stage
// (parallel/pipeline_model.h runs the schedule over the pp group; the loss and the logprobs are the last stage's,
// broadcast over the group), a tied embedding's gradient is summed over its two stages, and the gradient norm spans
// tp and pp. Generation then runs on a layout of its own (parallel/generation_layout.h: replicas of generation.tp
// ranks holding the whole model), and refit reshards the training stages into it (parallel/reshard.h); so does
// any generation.tp other than parallel.tp.
// Under expert parallelism (parallel.ep > 1, a mixture of experts; pp = cp = 1) the training and reference roles
// hold this rank's experts and their forwards exchange routed rows over the expert-parallel group
// (parallel/expert_parallel.h); generation holds every expert (gathered at refit), so that no generating rank waits
// for another, or with generation.experts = parallel this rank's experts only, its passes in lockstep with the
// group's (parallel/expert_lockstep.h); the optimizer sums the experts' gradients over the expert-data-parallel
// group; forward passes pair up over the group (empty passes fill in where a rank has fewer micro-batches).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "comm/comm.h"
#include "comm/host_collectives.h"
#include "generation/cpu_generator.h"
#include "model/moe_feed_forward.h"
#include "model/transformer.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "ops/ops.h"
#include "parallel/generation_layout.h"
#include "parallel/pipeline_model.h"
#include "parallel/reshard.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "rl/learner_optimizer.h"
#include "rl/learner_state.h"
#include "rl/policy_loss_pass.h"
#include "rl/training_passes.h"
#include "roles/rank_roles.h"
#include "runtime/error.h"
#include "train/all_reduce_adamw.h"
#include "train/sharded_adamw.h"

namespace hone::rl {
namespace {

// Weights shaped as this rank's shard over `data` (num_local_params values, outliving them): the gradients in the
// optimizer's buffer.
ModelWeights weights_over(const ShardLayout& layout, const ModelConfig& c, float* data) {
  ModelWeights w;
  w.layers.resize(size_t(c.num_hidden_layers));
  w.flat = Tensor::view(data, {layout.num_local_params()}, DType::f32);
  for (const ParamShard& p : layout.params()) {
    ParamSpec local = p.spec;
    local.shape = p.local_shape;
    w.bind(local, data + p.offset, layout.shape().experts);
    w.specs.push_back(std::move(local));
  }
  if (c.tie_word_embeddings) w.lm_head = w.embed_tokens;
  return w;
}

class CpuPolicyEngine final : public roles::RoleEngine {
 public:
  CpuPolicyEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial, const ParallelState& ps)
      : s_(s),
        mc_(mc),
        ps_(ps),
        pipe_(PipelineLayout::of(mc.num_hidden_layers, ps.pp_size(), s.vpp, s.pp_layers)),
        stage_(ShardLayout::of(mc, ps.tp_size(), ps.tp_rank(), &pipe_, ps.pp_rank(), ps.ep_size(), ps.ep_rank())),
        gen_layout_(GenerationLayout::of(ps.grid(), s.generation_tp)),
        passes_(mc, CpuBackend::Exec{}, ps.ep_size() > 1 ? &ps.ep() : nullptr, s.router_replay) {
    if (ps_.ep_size() > 1) {
      HONE_CHECK(!pipe_.split() && ps_.cp_size() == 1 && gen_layout_.same_as_training,
                 "expert parallelism with pipeline or context parallelism or a generation layout of its own");
      ep_ = std::make_unique<ExpertParallel>(mc_, ps_.ep(), ps_.tp_size(), ps_.tp_rank());
    }
    if (ps_.tp_size() > 1) {
      // Under sequence parallelism the collectives move in the deck's chunks, one after the other.
      const SequenceParallelism sp{s.sequence_parallel, s.tp_comm_overlap, s.tp_comm_overlap_chunks};
      tp_ = std::make_unique<TensorParallel>(mc_, ps_.tp(), CpuBackend::Exec{}, sp, &stage_);
      if (ep_) gen_tp_ = std::make_unique<TensorParallel>(mc_, ps_.tp(), CpuBackend::Exec{}, sp);  // every expert
    }
    if (ps_.cp_size() > 1) cp_ = std::make_unique<ContextParallel>(ps_.cp());
    train_w_ = allocate_shard_weights(stage_, mc_);
    HONE_CHECK(initial.flat.numel() == train_w_.flat.numel(), "initial weights of ", initial.flat.numel(),
               " parameters, this rank's shard has ", train_w_.flat.numel());
    std::memcpy(train_w_.flat.f32(), initial.flat.f32(), train_w_.flat.nbytes());
    if (s.loss.kl_coef > 0) {
      ref_w_ = allocate_shard_weights(stage_, mc_);
      std::memcpy(ref_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
    }
    if (pipe_.split()) {
      pipeline_ = std::make_unique<PipelineModel>(mc_, stage_, train_w_, tp_.get(), ps_.pp());
      pipeline_->set_recompute(s.recompute);
      if (ref_w_.flat.defined()) ref_pipeline_ = std::make_unique<PipelineModel>(mc_, stage_, ref_w_, tp_.get(), ps_.pp());
    } else {
      train_model_ = std::make_unique<Transformer>(mc_, train_w_, tp_.get(), ModelSpan{}, cp_.get(), ep_.get());
      train_model_->set_recompute(s.recompute);
      if (ref_w_.flat.defined())
        ref_model_ = std::make_unique<Transformer>(mc_, ref_w_, tp_.get(), ModelSpan{}, cp_.get(), ep_.get());
    }
    if (ep_ && s.generation_experts == "parallel") {
      // Generation on a copy of this rank's shard, its experts only: the group's passes run in lockstep and
      // exchange rows at every sparse layer as training's do (parallel/expert_lockstep.h).
      gen_lockstep_ = std::make_unique<ExpertLockstep>(ep_->host());
      gen_w_ = allocate_shard_weights(stage_, mc_);
      std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
      make_generator(tp_.get());
    } else if (ep_) {
      // Generation holds every expert of this tp rank's shard, gathered over the expert-parallel group in connect()
      // (collective) and at every refit.
      gen_w_ = allocate_shard_weights(ep_->full_layout(), mc_);
      make_generator(gen_tp_.get());
    } else if (gen_layout_.same_as_training) {
      // Generation runs on a copy of the training shard (refit: a flat copy).
      gen_w_ = allocate_shard_weights(stage_, mc_);
      std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
      make_generator(tp_.get());
    }
  }

  std::string describe() const override {
    std::string d = "cpu, fp32";
    if (tp_)
      d += cat(", tensor parallel over ", tp_->size(), " ranks",
               tp_->sequence_parallel() ? " with sequence parallelism" : "");
    if (pipe_.split())
      d += cat(", pipeline parallel over ", pipe_.pp(), " stages",
               pipe_.vpp() > 1 ? cat(" (interleaved 1F1B, ", pipe_.vpp(), " chunks each)") : std::string(" (1F1B)"));
    if (cp_) d += cat(", context parallel over ", cp_->size(), " ranks");
    if (ep_)
      d += cat(", expert parallel over ", ep_->size(), " ranks",
               gen_lockstep_ ? " (generation too, in lockstep)" : " (generation with every expert)");
    if (!gen_layout_.same_as_training)
      d += cat(", generation on ", gen_layout_.replicas(), gen_layout_.replicas() == 1 ? " replica" : " replicas",
               " of ", gen_layout_.tg, " rank",
               gen_layout_.tg > 1 ? "s" : "", " (resharding refit)");
    if (zero_) d += cat(", distributed optimizer (ZeRO-1) over ", optimizer_comm().size(), " ranks");
    return d;
  }

  void connect(const ModelWeights&) override {
    Comm& dp = optimizer_comm();
    // The clipping norm over the model's shards and the experts' group (rl/learner_optimizer.h, shared with the GPU
    // engine).
    DataParallelOptions po =
        learner_optimizer_options<CpuBackend>(stage_, ps_, tp_.get(), pipe_.split(), ep_ != nullptr,
                                              ep_ ? &ps_.edp() : nullptr, CpuBackend::Exec{}, s_.grad_reduce_in_fp32);
    if (ep_ && !gen_lockstep_) ep_->gather_experts(train_w_.flat.f32(), gen_w_.flat.f32());
    if (s_.distributed_optimizer && dp.size() > 1) {
      optimizer_ = std::make_unique<ShardedAdamW<CpuBackend>>(train_w_, s_.adamw, dp, std::move(po));
      zero_ = true;
    } else {
      // The training weights are the masters: updated in place.
      optimizer_ = std::make_unique<AllReduceAdamW<CpuBackend>>(train_w_, s_.adamw, &dp, std::move(po),
                                                                 CpuBackend::Exec{}, train_w_.flat.f32());
    }
    grads_ = weights_over(stage_, mc_, optimizer_->grads());  // backward accumulates into the optimizer's buffer
    if (!gen_layout_.same_as_training) {
      // Collective over the world: the replica's communicator, its shard of the whole model, the resharding plan.
      gen_group_ = std::make_unique<GenerationGroup>(ps_.grid(), gen_layout_.tg);
      const ShardLayout gen = ShardLayout::of(mc_, gen_layout_.tg, gen_layout_.rank_in_replica(ps_.world_rank()));
      if (gen_layout_.tg > 1) gen_tp_ = std::make_unique<TensorParallel>(mc_, gen_group_->host(), false);
      gen_w_ = allocate_shard_weights(gen, mc_);
      resharder_ = std::make_unique<Resharder<CpuBackend>>(
          plan_reshard(mc_, ps_.grid(), pipe_, gen_layout_.tg, ps_.world_rank()), ps_.world());
      make_generator(gen_tp_.get());
      resharder_->run(train_w_.flat.f32(), gen_w_.flat.f32());
    }
    // Every fp32 parameter copy: training, generation, reference; the optimizer's gradients (padded to a
    // multiple of dp under ZeRO-1) and AdamW state (whole, or this rank's shard of master weights and moments);
    // the resharding staging.
    const double param = double(train_w_.flat.nbytes());
    persistent_ = param * (1 + (ref_w_.flat.defined() ? 1 : 0)) + double(gen_w_.flat.nbytes()) +
                  double(optimizer_->device_bytes());
    if (resharder_)
      persistent_ += double(resharder_->plan().send_capacity + resharder_->plan().recv_capacity) * 4;
  }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    auto r = generator_->generate(requests, sampling, stop, seed, step, max_total, decode);
    peak_kv_ = std::max(peak_kv_, generator_->stats().peak_kv_bytes);
    stats_.generation.add(generator_->stats().tail);
    return r;
  }

  // The generator of a generation layout of its own is made at the first refit: it takes the function then.
  void set_generation_progress(GenerationProgressFn fn) override {
    gen_progress_ = std::move(fn);
    if (generator_) generator_->set_progress(gen_progress_);
  }

  void logprobs(Weights role, const PackedBatch& batch, float temperature, const int32_t* forced_routing,
                float* out) override {
    HONE_CHECK(role == Weights::policy || ref_w_.flat.defined(), "no reference model (loss.kl_coef = 0)");
    HONE_CHECK(!pipeline_, "a pipeline's logprobs come from its pass over the stages (logprobs_batches)");
    Transformer& m = role == Weights::policy ? *train_model_ : *ref_model_;
    const MoeRouting r = passes_.logprob_routing(m.moe() ? forced_routing : nullptr, batch.num_tokens());
    m.forward(batch, temperature, /*need_entropy=*/false, /*need_backward=*/false, /*input=*/nullptr, r);
    logprob_bytes_ = std::max(logprob_bytes_, m.allocated_bytes());
    std::memcpy(out, m.logprobs(), size_t(batch.num_tokens()) * sizeof(float));
  }

  // Under pipeline parallelism: one forward-only pass through the stages, the last stage's logprobs broadcast.
  void logprobs_batches(Weights role, const std::vector<const PackedBatch*>& batches, float temperature,
                        const std::vector<const int32_t*>& forced_routing,
                        const std::vector<std::vector<float>*>& out) override {
    if (!pipeline_) return RoleEngine::logprobs_batches(role, batches, temperature, forced_routing, out);
    HONE_CHECK(role == Weights::policy || ref_pipeline_, "no reference model (loss.kl_coef = 0)");
    PipelineModel& m = role == Weights::policy ? *pipeline_ : *ref_pipeline_;
    pipeline_logprobs(m, batches, temperature, ps_.pp(), out);  // rl/training_passes.h
    logprob_bytes_ = std::max(logprob_bytes_, m.allocated_bytes());
  }

  Comm* lockstep_group() const override { return ep_ ? &ep_->host() : nullptr; }
  MoeStepStats take_moe_stats() override { return passes_.take_moe_stats(); }

  // The passes of rl/training_passes.h, shared with the GPU engine: the policy loss pass on the arrays the forward
  // wrote (the last stage's, under a pipeline: its metrics are then broadcast over the stages); under expert
  // parallelism the ranks of the group run as many passes.
  std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& mbs, const TrainLoss& loss) override {
    validate_policy_loss_config(loss.config);
    grads_.flat.fill_zero();
    loss_.reserve(mbs);
    if (pipeline_) {
      auto metrics = train_pipeline<CpuBackend>(*pipeline_, loss_, mbs, loss, loss.config.entropy_coef != 0,
                                                grads_.flat.f32(), /*reducer=*/nullptr, ps_.pp(), stats_);
      training_bytes_ = std::max(training_bytes_, pipeline_->allocated_bytes());
      return metrics;
    }
    TrainingPassHooks hooks;
    hooks.after_pass = [&](int64_t) {
      training_bytes_ = std::max(training_bytes_, train_model_->allocated_bytes());
    };
    if (wants_pass_progress()) hooks.progress = [this](int64_t done) { passes_done(done); };
    return passes_.run(*train_model_, loss_, mbs, loss, grads_.flat.f32(), hooks);
  }

  // The global loss denominator already makes the sum over ranks the mean gradient. The training weights are
  // updated in place (ZeRO-1: all-gathered), so the next micro-batches train on them whatever last_of_step says.
  double optimizer_step(float lr, double max_grad_norm, bool) override {
    HONE_CHECK(optimizer_, "optimizer step before connect()");
    if (tp_) tp_->sum_partial_gradients(grads_);  // parameters several ranks hold: their gradients add up
    if (pipeline_) pipeline_->sum_tied_gradients(grads_);  // a tied embedding's two stage copies
    return optimizer_->step(lr, max_grad_norm, train_w_.flat.f32()).grad_norm;
  }
  int optimizer_step_count() const override { return optimizer_->step_count(); }

  void publish() override {
    if (ep_ && !gen_lockstep_) {
      ep_->gather_experts(train_w_.flat.f32(), gen_w_.flat.f32());
      return;
    }
    if (!resharder_) {
      std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
      return;
    }
    resharder_->run(train_w_.flat.f32(), gen_w_.flat.f32());
    stats_.refit_bytes += double(resharder_->plan().elements_received) * sizeof(float);
  }

  EngineMemory memory() const override {
    EngineMemory m;
    m.idle = m.refit = persistent_;
    m.generation = persistent_ + double(peak_kv_);
    m.logprob = persistent_ + double(logprob_bytes_);
    m.training = persistent_ + double(training_bytes_);
    return m;
  }
  void reset_memory() override {
    peak_kv_ = 0, logprob_bytes_ = training_bytes_ = 0;
    stats_ = EngineStepStats{};
    if (pipe_.split()) stats_.schedule = PipelineSchedule{pipe_.pp(), pipe_.vpp(), 0, false}.name();
  }
  EngineStepStats stats() const override { return stats_; }

  // The checkpoint state through rl/learner_state.h, shared with the GPU engine.
  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    read_learner_state<CpuBackend>(mc_, ps_, stage_, tp_ || pipe_.split(), ep_.get(), optimizer_comm().rank() == 0,
                                   *optimizer_, master, m, v);
  }
  void write_state(const ModelWeights& whole, const float* whole_m, const float* whole_v, int step_count) override {
    HONE_CHECK(whole.flat.numel() == count_parameters(mc_), "checkpoint weights do not match the model");
    write_learner_state<CpuBackend>(mc_, stage_, tp_ || pipe_.split() || ep_, *optimizer_, whole, whole_m, whole_v,
                                    step_count);
    optimizer_->refit(train_w_.flat.f32());  // the training weights (ZeRO-1: gathered; else the masters themselves)
    if (ep_ && !gen_lockstep_) extract_shard(ep_->full_layout(), whole, gen_w_);  // every expert: no collective
    else publish();  // the generation copy (a collective reshard under differing layouts: every rank restores)
    stats_.refit_bytes = 0;
  }

 private:
  // The ranks over which the gradients are summed and the optimizer state is sharded: dp, or dp x cp.
  Comm& optimizer_comm() const { return cp_ ? ps_.dp_cp() : ps_.dp(); }

  void make_generator(TensorParallel* tp) {
    GenerationOptions go;
    // A replica generates its share of the step's groups: the rollouts over the replicas.
    go.max_batch = int(std::max<int64_t>(1, std::min<int64_t>(256, s_.rollouts_per_step() / gen_layout_.replicas())));
    generator_ = std::make_unique<CpuGenerator>(mc_, gen_w_, go, tp, gen_lockstep_ ? ep_.get() : nullptr,
                                                gen_lockstep_.get());
    if (gen_progress_) generator_->set_progress(gen_progress_);
  }

  GrpoSettings s_;
  ModelConfig mc_;
  const ParallelState& ps_;
  PipelineLayout pipe_;
  ShardLayout stage_;  // this rank's shard of its stage (the whole model's shard at pp = 1)
  GenerationLayout gen_layout_;
  std::unique_ptr<TensorParallel> tp_;  // parallel.tp > 1
  std::unique_ptr<ContextParallel> cp_;  // parallel.cp > 1
  std::unique_ptr<ExpertParallel> ep_;  // parallel.ep > 1
  std::unique_ptr<ExpertLockstep> gen_lockstep_;  // generation.experts = parallel: generation's experts split too
  ModelWeights train_w_, gen_w_, ref_w_, grads_;
  std::unique_ptr<Transformer> train_model_, ref_model_;      // pp = 1
  std::unique_ptr<PipelineModel> pipeline_, ref_pipeline_;    // pp > 1
  std::unique_ptr<GenerationGroup> gen_group_;                // a generation layout of its own
  std::unique_ptr<TensorParallel> gen_tp_;  // generation's tp group: its replica's, or every expert's under ep
  std::unique_ptr<Resharder<CpuBackend>> resharder_;
  std::unique_ptr<CpuGenerator> generator_;
  GenerationProgressFn gen_progress_;
  std::unique_ptr<DataParallelOptimizer<CpuBackend>> optimizer_;
  bool zero_ = false;  // optimizer_ is ShardedAdamW (ZeRO-1)
  PolicyLossPass<CpuBackend> loss_;  // the loss of the training micro-batches and its gradients
  TrainingPasses<CpuBackend> passes_;  // pp = 1: the training passes and their MoE routing
  double persistent_ = 0;
  int64_t peak_kv_ = 0;
  size_t logprob_bytes_ = 0, training_bytes_ = 0;
  EngineStepStats stats_;
};

}  // namespace

std::unique_ptr<roles::RoleEngine> make_cpu_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                   const ModelWeights& initial, const ParallelState& ps) {
  return std::make_unique<CpuPolicyEngine>(s, mc, initial, ps);
}

}  // namespace hone::rl
