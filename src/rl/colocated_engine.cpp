// The colocated engine, written once over a backend B (backend/backend.h): every role of this rank on one device.
// One copy of the policy's compute weights serves training, the logprob pass and generation (the weight channel
// refits it from the optimizer's fp32 masters in place, so a GPU's decode CUDA graphs stay valid; on the CPU the fp32
// weights are their own masters and refit is nothing); a second copy is the frozen reference when the KL term needs
// it. The master weights, gradients and Adam moments live in the data-parallel optimizer
// (train/data_parallel_optimizer.h): AllReduceAdamW (whole state on every rank; gradients all-reduced) or, with
// train.distributed_optimizer and more than one rank, ShardedAdamW (ZeRO-1: reduce-scatter, sharded state,
// all-gather). With several ranks a GradReducer launches each bucket's reduction as soon as the last micro-batch's
// backward has finished it. The policy loss runs in the backend's memory between each training forward and
// backward (rl/policy_loss_pass.h); the loss metrics come back once per optimizer step.
//   CpuBackend:  fp32 on the host, collectives over MPI: the reference every CPU-over-MPI test runs.
//   CudaBackend: bf16 compute weights on one GPU per rank, fp32 masters, collectives over NCCL on the engine's
//                stream (backend/engine_device.h).
// Memory is handed from phase to phase: the activation arenas and the gradient buffer are freed before generation
// and the KV cache's memory after it (generation.keep_graphs: its addresses and the decode graphs stay for the next
// step); with train.optimizer_offload the Adam moments wait in host memory while generation runs
// (backend/offloadable_weights.h and AdamW: nothing moves on the CPU).
// The layouts:
//   tensor parallelism (parallel.tp > 1): every role holds this rank's shard (parallel/shard_layout.h), the models
//     and the generator compute over the tp group (parallel/tensor_parallel.h; sequence parallelism for training and
//     logprobs, generation on whole rows), the optimizer works on the shard's flat buffer over dp with the clipping
//     norm spanning the group, and checkpoints stay whole (rl/learner_state.h).
//   context parallelism (parallel.cp > 1): the models split every micro-batch over the cp group
//     (parallel/context_parallel.h; attention by the ring) and every rank gets all the rows' logprobs, so the loss
//     runs whole; the optimizer sums the gradients over dp x cp instead of dp.
//   pipeline parallelism (parallel.pp > 1): training and reference hold this rank's stage and run the schedule over
//     the pp group (parallel/pipeline_model.h, rl/training_passes.h): the loss runs on the last stage, its metrics and
//     the logprobs are broadcast over the host pp group, the tied embedding's two copies are summed over the
//     embedding group (parallel/embedding_group.h), and the clipping norm spans tp and pp. Generation then has
//     weights of its own (parallel/generation_layout.h: replicas of generation.tp ranks holding every layer; so does
//     any generation.tp other than parallel.tp), and refit reshards into them (parallel/reshard.h); with
//     train.offload_during_generation the idle training copies wait in host memory while generation runs.
//   expert parallelism (parallel.ep > 1, a mixture of experts; pp = cp = 1): training holds this rank's experts
//     (parallel/expert_parallel.h), generation every expert (gathered at refit) or, by generation.experts, its own
//     with the group's passes in lockstep (parallel/expert_lockstep.h); the experts' gradients are summed over the
//     expert-data-parallel group.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>

#include "backend/backend.h"
#include "backend/engine_device.h"
#include "backend/offloadable_weights.h"
#include "comm/host_collectives.h"
#include "generation/generator.h"
#include "model/moe_feed_forward.h"
#include "model/transformer.h"
#include "parallel/context_parallel.h"
#include "parallel/embedding_group.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "parallel/generation_layout.h"
#include "parallel/pipeline_model.h"
#include "parallel/reshard.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "rl/engine_memory.h"
#include "rl/learner_optimizer.h"
#include "rl/learner_state.h"
#include "rl/policy_loss_pass.h"
#include "rl/training_passes.h"
#include "roles/rank_roles.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_reducer.h"
#include "train/sharded_adamw.h"

namespace hone::rl {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <typename B>
class ColocatedEngine final : public roles::RoleEngine {
 public:
  using A = typename B::Act;
  using Model = TransformerModel<B>;
  using Pipeline = PipelineStage<B>;
  using TensorParallel = TensorParallelGroup<B>;
  using Generator = ::hone::Generator<B>;

  ColocatedEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial, const ParallelState& ps)
      : s_(s),
        mc_(mc),
        ps_(ps),
        x_(device_.exec()),
        pipe_(PipelineLayout::of(mc.num_hidden_layers, ps.pp_size(), s.vpp, s.pp_layers)),
        stage_(ShardLayout::of(mc, ps.tp_size(), ps.tp_rank(), &pipe_, ps.pp_rank(), ps.ep_size(), ps.ep_rank())),
        gen_layout_(GenerationLayout::of(ps.grid(), s.generation_tp)),
        layout_(stage_.param_layout()),
        loss_(x_),
        passes_(mc, x_, ps.ep_size() > 1 ? &ps.ep() : nullptr, s.router_replay) {
    GroupCommOptions o;
    o.timeout_s = s.nccl_timeout_s;  // on the engine's stream: the groups' collectives are ordered with the kernels
    if (ps_.ep_size() > 1) {
      HONE_CHECK(!pipe_.split() && ps_.cp_size() == 1 && gen_layout_.same_as_training,
                 "expert parallelism with pipeline or context parallelism or a generation layout of its own");
      ep_comm_ = device_.comm(ps_, CommGroup::ep, o);
      ep_ = std::make_unique<ExpertParallelGroup<B>>(mc_, ps_.ep(), *ep_comm_, x_, ps_.tp_size(), ps_.tp_rank());
    }
    if (ps_.tp_size() > 1) {
      // The host does not wait for each of the tp group's collectives (a watchdog thread watches them on a GPU).
      GroupCommOptions to = o;
      to.stream_ordered = true;
      tp_comm_ = device_.comm(ps_, CommGroup::tp, to);
      const SequenceParallelism sp{s.sequence_parallel, s.tp_comm_overlap, s.tp_comm_overlap_chunks};
      tp_ = std::make_unique<TensorParallel>(mc_, *tp_comm_, x_, sp, &stage_);
      if (ep_) gen_tp_ = std::make_unique<TensorParallel>(mc_, *tp_comm_, x_);  // generation: every expert
    }
    if (ps_.cp_size() > 1) {
      cp_comm_ = device_.comm(ps_, CommGroup::cp, o);
      cp_ = std::make_unique<ContextParallelGroup<B>>(*cp_comm_, x_);
    }
    HONE_CHECK(initial.flat.numel() == layout_.num_params, "initial weights of ", initial.flat.numel(),
               " parameters, this rank's ", tp_ || pipe_.split() ? "shard" : "model", " has ", layout_.num_params);
    const int max_tokens = int(std::max<int64_t>(1, s.max_tokens_per_microbatch));  // the arenas grow as needed
    train_w_ = std::make_unique<OffloadableWeights<B>>(layout_.num_params, x_);
    B::upload_weights(x_, train_w_->get(), initial.flat.f32(), layout_.num_params);
    if (s.loss.kl_coef > 0) {
      ref_w_ = std::make_unique<OffloadableWeights<B>>(layout_.num_params, x_);
      B::upload_weights(x_, ref_w_->get(), initial.flat.f32(), layout_.num_params);
    }
    if (pipe_.split()) {
      pp_comm_ = device_.comm(ps_, CommGroup::pp, o);
      pipeline_ = std::make_unique<Pipeline>(mc_, stage_, train_w_->get(), x_, max_tokens, tp_.get(), *pp_comm_);
      pipeline_->set_recompute(s.recompute);
      if (ref_w_)
        ref_pipeline_ = std::make_unique<Pipeline>(mc_, stage_, ref_w_->get(), x_, max_tokens, tp_.get(), *pp_comm_);
    } else {
      policy_ = std::make_unique<Model>(mc_, layout_, x_, max_tokens, tp_.get(), ModelSpan{}, train_w_->get(),
                                        cp_.get(), ep_.get());
      policy_->set_recompute(s.recompute);
      if (ref_w_)
        reference_ = std::make_unique<Model>(mc_, layout_, x_, max_tokens, tp_.get(), ModelSpan{}, ref_w_->get(),
                                             cp_.get(), ep_.get());
    }
    if (ep_) {
      const double every_expert = double(ep_->full_layout().num_local_params()) * sizeof(A);
      if (generation_splits_experts(s.generation_experts, every_expert, device_.free_bytes(), ps_.world())) {
        // Generation on the training weights, this rank's experts only: the group's passes in lockstep.
        gen_lockstep_ = std::make_unique<ExpertLockstep>(ps_.ep());
        make_generator_on(stage_, train_w_->get(), tp_.get());
      } else {
        // Generation reads a buffer with every expert, filled in connect() and at every refit (collective).
        check_every_expert_fits(ep_->size(), every_expert, device_.free_bytes());
        gen_w_ = std::make_unique<typename B::template Array<A>>(ep_->full_layout().num_local_params(),
                                                                 "generation weights (every expert)");
        make_generator_on(ep_->full_layout(), gen_w_->get(), gen_tp_.get());
      }
    } else if (gen_layout_.same_as_training) {
      make_generator_on(stage_, train_w_->get(), tp_.get());
    }
    if (pipe_.split()) stats_.schedule = PipelineSchedule{pipe_.pp(), pipe_.vpp(), 0, false}.name();
  }

  std::string describe() const override {
    std::string d = device_.describe();
    if (tp_) {
      d += cat(", tensor parallel over ", tp_->size(), " ranks");
      if (tp_->sequence_parallel())
        d += s_.tp_comm_overlap ? cat(" with sequence parallelism (overlapped in ", s_.tp_comm_overlap_chunks,
                                      " chunks)")
                                : std::string(" with sequence parallelism");
    }
    if (pipe_.split())
      d += cat(", pipeline parallel over ", pipe_.pp(), " stages",
               pipe_.vpp() > 1 ? cat(" (interleaved 1F1B, ", pipe_.vpp(), " chunks each)") : std::string(" (1F1B)"));
    if (cp_) d += cat(", context parallel over ", cp_->size(), " ranks (ring attention)");
    if (ep_)
      d += cat(", expert parallel over ", ep_->size(), " ranks",
               gen_lockstep_ ? " (generation too, in lockstep)" : " (generation with every expert)");
    if (!gen_layout_.same_as_training)
      d += cat(", generation on ", gen_layout_.replicas(), gen_layout_.replicas() == 1 ? " replica" : " replicas",
               " of ", gen_layout_.tg, " rank", gen_layout_.tg > 1 ? "s" : "", " (resharding refit)");
    if (optimizer_ranks() > 1) {
      d += zero_ ? cat(", distributed optimizer (ZeRO-1) over ", optimizer_ranks(), " ranks")
                 : cat(", gradients all-reduced over ", optimizer_ranks(), " ranks");
      if constexpr (!std::is_same_v<A, float>) d += s_.grad_reduce_in_fp32 ? " (fp32)" : " (bf16)";
    }
    if (ps_.world_size() > 1) d += cat("; collectives over ", device_.collectives());
    return d;
  }
  void synchronize() override { device_.synchronize(); }

  // With one data-parallel rank the distributed optimizer is the plain one (one rank's shard is everything).
  void connect(const ModelWeights& initial) override {
    HONE_CHECK(!optimizer_, "connect() twice");
    const int ranks = optimizer_ranks();
    zero_ = s_.distributed_optimizer && ranks > 1;
    check_memory_fits<B>(s_, mc_, ps_, pipe_, gen_layout_, ranks, zero_, policy_.get(), pipeline_.get(),
                         device_.describe(), device_.free_bytes(), ep_ && gen_w_);
    GroupCommOptions o;
    o.timeout_s = s_.nccl_timeout_s;
    o.on_engine_stream = false;  // the gradients' collectives run on a queue of their own (train/grad_reducer.h)
    // dp, or dp x cp: the ranks holding the same weights
    if (ranks > 1) dp_comm_ = device_.comm(ps_, cp_ ? CommGroup::dp_cp : CommGroup::dp, o);
    // The clipping norm over the model's shards and the experts' group (rl/learner_optimizer.h); under expert
    // parallelism the experts' gradients cross the expert-data-parallel group.
    if (ep_ && ps_.edp_size() > 1) edp_comm_ = device_.comm(ps_, CommGroup::edp, o);
    DataParallelOptions po = learner_optimizer_options<B>(stage_, ps_, tp_.get(), pipe_.split(), ep_ != nullptr,
                                                          edp_comm_.get(), x_, s_.grad_reduce_in_fp32);
    po.layout = &layout_;  // buckets in backward's order: the reducer launches them while backward runs
    if (zero_) {
      optimizer_ = std::make_unique<ShardedAdamW<B>>(initial, s_.adamw, *dp_comm_, po, x_);
    } else {
      // Where the compute weights are fp32 they are the masters, updated in place.
      A* masters = AllReduceAdamW<B>::kWeightsAreMasters ? train_w_->get() : nullptr;
      optimizer_ = std::make_unique<AllReduceAdamW<B>>(initial, s_.adamw, dp_comm_.get(), po, x_, masters);
    }
    if (optimizer_->reduces()) {
      reducer_ = std::make_unique<GradReducer<B>>(*optimizer_, layout_, x_);
      if (policy_) reducer_->attach(*policy_);
    }
    o.on_engine_stream = true;
    if (pipe_.split()) {
      // Collective over the world: the first and last stages' pairs (a tied embedding's two copies).
      emb_group_ = std::make_unique<EmbeddingGroup>(ps_.grid(), ps_.world_rank());
      const ParamShard* tied = stage_.try_find("model.embed_tokens.weight");
      if (emb_group_->member() && tied && tied->tied_across_stages()) {
        emb_comm_ = device_.comm(emb_group_->host(), o);
        tied_ = tied;
      }
    }
    if (!gen_layout_.same_as_training) {
      // Collective over the world: the replica's communicator, its shard of every layer, the resharding plan.
      gen_group_ = std::make_unique<GenerationGroup>(ps_.grid(), gen_layout_.tg);
      gen_shard_ = std::make_unique<ShardLayout>(
          ShardLayout::of(mc_, gen_layout_.tg, gen_layout_.rank_in_replica(ps_.world_rank())));
      if (gen_layout_.tg > 1) {
        gen_comm_ = device_.comm(gen_group_->host(), o);
        gen_tp_ = std::make_unique<TensorParallel>(mc_, *gen_comm_, x_);
      }
      gen_w_ = std::make_unique<typename B::template Array<A>>(gen_shard_->num_local_params(), "generation weights");
      B::zero(x_, gen_w_->get(), gen_w_->bytes());  // vocabulary padding stays 0
      world_comm_ = device_.comm(ps_, CommGroup::world, o);
      resharder_ = std::make_unique<Resharder<B>>(
          plan_reshard(mc_, ps_.grid(), pipe_, gen_layout_.tg, ps_.world_rank()), *world_comm_, x_);
      make_generator_on(*gen_shard_, gen_w_->get(), gen_tp_.get());
      resharder_->run(train_w_->get(), gen_w_->get());
      B::sync(x_);
    }
    if (ep_ && gen_w_) ep_->gather_experts(train_w_->get(), gen_w_->get());
    log_debug("optimizer: ", optimizer_->zero_layout().buckets().size(), " gradient buckets, ",
              optimizer_->device_bytes() / double(1 << 30), " GiB of optimizer state and gradients");
  }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    // The activation arenas and the (zero) gradients are not needed until the logprob and training phases: their
    // memory goes to the KV cache.
    release_arenas();
    loss_.release();
    optimizer_->release_grads();
    const Clock::time_point t0 = Clock::now();
    if (s_.optimizer_offload || s_.offload_during_generation) optimizer_->offload_state();
    if (s_.offload_during_generation && !gen_layout_.same_as_training) {
      // The training (and reference) copies are idle until the logprob phase: generation has its own.
      train_w_->offload(x_);
      if (ref_w_) ref_w_->offload(x_);
    }
    if (s_.offload_during_generation) stats_.offload_s += seconds_since(t0);
    auto r = generator_->generate(requests, sampling, stop, seed, step, max_total, decode);
    stats_.graph_captures += generator_->stats().cuda_graph_captures;
    stats_.graph_replays += generator_->stats().cuda_graph_replays;
    mem_.generation = std::max(mem_.generation, persistent() + double(generator_->stats().peak_kv_bytes));
    stats_.generation.add(generator_->stats().tail);
    note_device_use();
    return r;
  }
  // The generator of a generation layout of its own is made at the first refit: it takes the function then.
  void set_generation_progress(GenerationProgressFn fn) override {
    gen_progress_ = std::move(fn);
    if (generator_) generator_->set_progress(gen_progress_);
  }
  void end_generation() override {
    generator_->release();
    const Clock::time_point t0 = Clock::now();
    if (optimizer_->state_offloaded()) optimizer_->reload_state();
    if (train_w_->offloaded()) {
      train_w_->reload(x_);
      if (policy_) policy_->set_shared_weights(train_w_->get());
      if (pipeline_) pipeline_->set_weights(train_w_->get());
    }
    if (ref_w_ && ref_w_->offloaded()) {
      ref_w_->reload(x_);
      if (reference_) reference_->set_shared_weights(ref_w_->get());
      if (ref_pipeline_) ref_pipeline_->set_weights(ref_w_->get());
    }
    if (s_.offload_during_generation) stats_.offload_s += seconds_since(t0);
  }

  void logprobs(Weights role, const PackedBatch& batch, float temperature, const int32_t* forced_routing,
                float* out) override {
    HONE_CHECK(role == Weights::policy || ref_w_, "no reference model (loss.kl_coef = 0)");
    HONE_CHECK(!pipeline_, "a pipeline's logprobs come from its pass over the stages (logprobs_batches)");
    Model& m = role == Weights::policy ? *policy_ : *reference_;
    const MoeRouting r = passes_.logprob_routing(m.moe() ? forced_routing : nullptr, batch.num_tokens());
    m.forward(batch, temperature, /*need_entropy=*/false, /*need_backward=*/false, /*input=*/nullptr, r);
    B::download(x_, out, m.logprobs(), size_t(batch.num_tokens()) * sizeof(float));  // straight to the host
    B::sync(x_);
    mem_.logprob = std::max(mem_.logprob, persistent() + arena_bytes());
    note_device_use();
  }

  // Under pipeline parallelism: one forward-only pass through the stages, the last stage's logprobs broadcast.
  void logprobs_batches(Weights role, const std::vector<const PackedBatch*>& batches, float temperature,
                        const std::vector<const int32_t*>& forced_routing,
                        const std::vector<std::vector<float>*>& out) override {
    if (!pipeline_) return RoleEngine::logprobs_batches(role, batches, temperature, forced_routing, out);
    HONE_CHECK(role == Weights::policy || ref_pipeline_, "no reference model (loss.kl_coef = 0)");
    Pipeline& m = role == Weights::policy ? *pipeline_ : *ref_pipeline_;
    pipeline_logprobs(m, batches, temperature, ps_.pp(), out);  // rl/training_passes.h
    mem_.logprob = std::max(mem_.logprob, persistent() + arena_bytes());
    note_device_use();
  }

  // Training starts: the reference model's arena (logprob phase only) goes back first. The loss runs in the
  // backend's memory between each forward and backward; the host waits once, for the metrics, after the last
  // backward.
  std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& mbs, const TrainLoss& loss) override {
    validate_policy_loss_config(loss.config);
    if (reference_) reference_->release_arenas();
    if (ref_pipeline_) ref_pipeline_->release();
    optimizer_->zero_grads();
    loss_.reserve(mbs);
    const bool entropy_grad = loss.config.entropy_coef != 0;
    if (pipeline_) {  // a stage whose tied embedding is summed over its two copies first reduces in the optimizer step
      auto metrics = train_pipeline(*pipeline_, loss_, mbs, loss, entropy_grad, optimizer_->grads(),
                                    emb_comm_ ? nullptr : reducer_.get(), ps_.pp(), stats_);
      mem_.training = std::max(mem_.training, persistent() + arena_bytes() + double(loss_.bytes()));
      note_device_use();
      return metrics;
    }
    // The passes (rl/training_passes.h); the last backward reduces the gradients over the data-parallel ranks while
    // it runs.
    TrainingPassHooks hooks;
    if (reducer_) hooks.before_last_backward = [&] { reducer_->arm(); };
    hooks.after_pass = [&](int64_t) {
      mem_.training = std::max(mem_.training, persistent() + arena_bytes() + double(loss_.bytes()));
      note_device_use();
    };
    if (wants_pass_progress()) hooks.progress = [this](int64_t done) { passes_done(done); };
    return passes_.run(*policy_, loss_, mbs, loss, optimizer_->grads(), hooks);
  }

  // The global loss denominator already makes the sum over ranks the mean gradient.
  double optimizer_step(float lr, double max_grad_norm, bool last_of_step) override {
    HONE_CHECK(optimizer_, "optimizer step before connect()");
    // A tied embedding's two stage copies: their gradients summed over the pair first. The copies lie at other
    // offsets of their stages' buffers, so a reduce-scatter over dp would shard them differently; the reducer
    // leaves such a stage's buckets to this call (train()).
    if (emb_comm_) {
      float* g = optimizer_->grads() + tied_->offset;
      emb_comm_->all_reduce_sum(g, tied_->local_numel());
    }
    // The buckets launched during the last backward, and the rest; a rank with no micro-batch in this optimizer
    // step launches them all here, in the same bucket order. Every rank reduces over dp before it sums the partial
    // gradients over tp (whose ranks lay their shards out alike): a rank that reduced after its sums would take its
    // peers' gradients unsummed.
    if (reducer_) reducer_->wait_all();
    if (tp_) tp_->sum_partial_gradients(optimizer_->grads());  // parameters several ranks hold: gradients add up
    const OptimizerStepResult r = optimizer_->update(lr, max_grad_norm);
    if (!last_of_step) optimizer_->refit(train_w_->get());  // the next micro-batches train on the new weights
    return r.grad_norm;
  }
  int optimizer_step_count() const override { return optimizer_->step_count(); }

  void publish() override {
    optimizer_->refit(train_w_->get());
    if (ep_ && gen_w_) ep_->gather_experts(train_w_->get(), gen_w_->get());
    if (resharder_) {
      resharder_->run(train_w_->get(), gen_w_->get());
      stats_.refit_bytes += double(resharder_->plan().elements_received) * sizeof(A);
    }
    mem_.refit = std::max(mem_.refit, persistent());
  }

  Comm* lockstep_group() const override { return ep_ ? &ps_.ep() : nullptr; }
  MoeStepStats take_moe_stats() override { return passes_.take_moe_stats(); }

  EngineMemory memory() const override {
    EngineMemory m = mem_;
    m.idle = persistent();
    m.refit = std::max(m.refit, m.idle);
    return m;
  }
  void reset_memory() override {
    mem_ = EngineMemory{};
    const std::string schedule = stats_.schedule;
    stats_ = EngineStepStats{};
    stats_.schedule = schedule;
  }
  EngineStepStats stats() const override { return stats_; }

  // Checkpoints are whole and independent of tp, pp and dp: the optimizer group's rank 0 downloads its shard and,
  // under tp or pp, the shards are gathered over the host tp and pp groups onto world rank 0, one parameter at a
  // time (rl/learner_state.h).
  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    const bool dp_root = (cp_ ? ps_.dp_cp_rank() : ps_.dp_rank()) == 0;  // rank 0 of the optimizer's group
    read_learner_state<B>(mc_, ps_, stage_, tp_ || pipe_.split(), ep_.get(), dp_root, *optimizer_, master, m, v);
  }
  void write_state(const ModelWeights& master, const float* m, const float* v, int step_count) override {
    HONE_CHECK(master.flat.numel() == count_parameters(mc_), "checkpoint weights do not match the model");
    write_learner_state<B>(mc_, stage_, tp_ || pipe_.split() || ep_, *optimizer_, master, m, v,
                           step_count);  // this rank's slices
    optimizer_->refit(train_w_->get());
    if (ep_ && gen_w_) ep_->gather_experts(train_w_->get(), gen_w_->get());  // collective: every rank restores
    if (resharder_) resharder_->run(train_w_->get(), gen_w_->get());  // collective: every rank restores
    B::sync(x_);
    stats_.refit_bytes = 0;
  }

 private:
  void make_generator_on(const ShardLayout& layout, A* weights, TensorParallel* tp) {
    GenerationOptions go;
    go.kv_cache_gib = s_.kv_cache_gib;
    go.kv_cache_memory_fraction = s_.kv_cache_memory_fraction;
    go.block_size = s_.kv_block_size;
    go.cuda_graphs = s_.cuda_graphs;
    go.keep_graphs = s_.keep_graphs;
    // A replica generates its share of the step's groups (make_generator caps it at the backend's most).
    go.max_num_seqs =
        int(std::max<int64_t>(1, std::min<int64_t>(1 << 20, s_.rollouts_per_step() / gen_layout_.replicas())));
    generator_ = make_generator<B>(mc_, layout, weights, x_, go, tp, gen_lockstep_ ? ep_.get() : nullptr,
                                gen_lockstep_.get());
    if (gen_progress_) generator_->set_progress(gen_progress_);
  }

  void release_arenas() {
    if (policy_) policy_->release_arenas();
    if (reference_) reference_->release_arenas();
    if (pipeline_) pipeline_->release();
    if (ref_pipeline_) ref_pipeline_->release();
  }

  double persistent() const {
    double w = train_w_->offloaded() ? 0.0 : double(train_w_->bytes());
    if (ref_w_ && !ref_w_->offloaded()) w += double(ref_w_->bytes());
    if (gen_w_) w += double(gen_w_->bytes());  // a generation layout of its own, or every expert under ep
    if (resharder_) w += double(resharder_->staging_bytes());
    return w + double(optimizer_->device_bytes());
  }
  // The ranks the gradients are summed over: dp, or dp x cp.
  int optimizer_ranks() const { return cp_ ? ps_.dp_cp_size() : ps_.dp_size(); }
  double arena_bytes() const {
    double b = 0;
    if (policy_) b += double(policy_->forward_arena_capacity() + policy_->backward_arena_capacity());
    if (reference_) b += double(reference_->forward_arena_capacity() + reference_->backward_arena_capacity());
    if (pipeline_) b += double(pipeline_->allocated_bytes());
    if (ref_pipeline_) b += double(ref_pipeline_->allocated_bytes());
    return b;
  }
  // The driver's count of device memory in use at the fullest point seen (0 on the CPU).
  void note_device_use() { mem_.device = std::max(mem_.device, device_.used_bytes()); }

  // Declared in the order they are made; destroyed the other way (the device's context last).
  EngineDevice<B> device_;
  GrpoSettings s_;
  ModelConfig mc_;
  const ParallelState& ps_;
  typename B::Exec x_;
  PipelineLayout pipe_;
  ShardLayout stage_;  // this rank's shard of its stage (the whole model's shard at pp = 1)
  GenerationLayout gen_layout_;
  ParamLayout layout_;
  GroupComm edp_comm_, ep_comm_;  // parallel.ep > 1
  std::unique_ptr<ExpertParallelGroup<B>> ep_;
  GroupComm pp_comm_, tp_comm_;
  std::unique_ptr<TensorParallel> tp_;  // parallel.tp > 1
  std::unique_ptr<OffloadableWeights<B>> train_w_, ref_w_;  // the compute weights of the roles
  GroupComm cp_comm_;
  std::unique_ptr<ContextParallelGroup<B>> cp_;                 // parallel.cp > 1
  std::unique_ptr<Model> policy_, reference_;                   // pp = 1
  std::unique_ptr<Pipeline> pipeline_, ref_pipeline_;           // pp > 1
  std::unique_ptr<EmbeddingGroup> emb_group_;                   // pp > 1
  GroupComm emb_comm_;
  const ParamShard* tied_ = nullptr;  // the tied embedding of this stage, summed over emb_comm_
  GroupComm dp_comm_;
  std::unique_ptr<DataParallelOptimizer<B>> optimizer_;
  std::unique_ptr<GenerationGroup> gen_group_;  // a generation layout of its own
  std::unique_ptr<ShardLayout> gen_shard_;      // ... and its shard
  GroupComm world_comm_, gen_comm_;
  std::unique_ptr<TensorParallel> gen_tp_;  // generation's tp group: its replica's, or every expert's under ep
  std::unique_ptr<typename B::template Array<A>> gen_w_;  // generation's weights when not the training copy
  std::unique_ptr<ExpertLockstep> gen_lockstep_;  // generation.experts = parallel: generation's experts split too
  std::unique_ptr<Resharder<B>> resharder_;
  std::unique_ptr<Generator> generator_;
  GenerationProgressFn gen_progress_;
  PolicyLossPass<B> loss_;  // the loss of the training micro-batches and its gradients
  TrainingPasses<B> passes_;  // pp = 1: the passes, a mixture of experts' routing tables
  std::unique_ptr<GradReducer<B>> reducer_;
  bool zero_ = false;  // optimizer_ is ShardedAdamW (ZeRO-1)
  EngineMemory mem_;
  EngineStepStats stats_;
};

}  // namespace

template <typename B>
std::unique_ptr<roles::RoleEngine> make_engine(const GrpoSettings& s, const ModelConfig& mc,
                                               const ModelWeights& initial, const ParallelState& ps) {
  return std::make_unique<ColocatedEngine<B>>(s, mc, initial, ps);
}

std::unique_ptr<roles::RoleEngine> make_engine(const GrpoSettings& s, const ModelConfig& mc,
                                               const ModelWeights& initial, const ParallelState& ps) {
  return with_backend(s.cuda, [&]<typename B>() { return make_engine<B>(s, mc, initial, ps); });
}

#define HONE_INSTANTIATE_ENGINE(B)                                                                      \
  template std::unique_ptr<roles::RoleEngine> make_engine<B>(const GrpoSettings&, const ModelConfig&, \
                                                             const ModelWeights&, const ParallelState&);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_ENGINE)
#undef HONE_INSTANTIATE_ENGINE

}  // namespace hone::rl
