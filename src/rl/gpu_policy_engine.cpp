// The GPU policy engine (run.device = "cuda"), one GPU per rank, colocated: one bf16 copy of the policy weights
// serves training, the logprob pass and generation (refit casts the fp32 master weights into it in place, so the
// decode CUDA graphs stay valid); a second bf16 copy is the frozen reference when the KL term needs it. The fp32
// master weights, gradients and Adam moments live in the data-parallel optimizer (train/data_parallel_optimizer.h,
// over CudaBackend): AllReduceAdamW (whole state on every rank; gradients all-reduced over NCCL) or, with
// train.distributed_optimizer and more than one rank, ShardedAdamW (ZeRO-1: reduce-scatter, sharded state, bf16
// all-gather). With several ranks a GradReducer launches each bucket's reduction as soon as the last micro-batch's
// backward has finished it. The policy loss runs on the device between each training forward and backward
// (rl/policy_loss_pass.h): logprobs and their gradients never leave the GPU; the loss metrics come back once per
// optimizer step.
// Memory is handed from phase to phase: the activation arenas and the gradient buffer are freed before generation
// and the KV cache's memory after it (generation.keep_graphs: its addresses and the decode graphs stay for the next
// step); with train.optimizer_offload the Adam moments wait in pinned host memory while generation runs.
// Under tensor parallelism (parallel.tp > 1) every role holds this rank's shard (parallel/shard_layout.h), the models
// and the generator compute over the tp group's stream-ordered NcclComm on the engine's stream
// (parallel/tensor_parallel.h; sequence parallelism for training and logprobs, generation on whole rows),
// the optimizer works on the shard's flat buffer over dp with the clipping norm spanning the group, and checkpoints
// stay whole: read_state gathers the shards onto world rank 0 over the host tp group, write_state keeps this rank's
// slices.
// Under context parallelism (parallel.cp > 1) the models split every micro-batch over the cp group's NcclComm
// (parallel/context_parallel.h; attention by the ring, parallel/ring_attention.h) and every rank gets all
// the rows' logprobs on the device, so the loss runs whole; the optimizer sums the gradients over dp x cp
// (CommGroup::dp_cp, ZeRO-1 included) instead of dp.
// Under pipeline parallelism (parallel.pp > 1) the training and reference roles hold this rank's stage and run the
// schedule over the pp group's NcclComm on the engine's stream (parallel/pipeline_model.h): the loss runs on the
// last stage, its metrics and the logprob pass's logprobs are broadcast over the host pp group, the tied
// embedding's two copies are summed over the embedding group (parallel/embedding_group.h), and the clipping norm
// spans tp and pp. Generation then has weights of its own (parallel/generation_layout.h: replicas of
// generation.tp ranks holding every layer; so does any generation.tp other than parallel.tp), and refit casts the
// master weights into the training copy, then reshards it into the generation copy over NCCL
// (parallel/reshard.h); with train.offload_during_generation the idle training copies and the Adam moments
// wait in pinned host memory while generation runs.
// The training passes, a mixture of experts' load-balancing loss, routing statistics and replay among them, and
// pipeline training: rl/training_passes.h, shared with the CPU engine. Under expert
// parallelism (parallel.ep > 1) training holds this rank's experts (parallel/expert_parallel.h), generation every
// expert (rl/gpu_expert_engine.h) or its own in lockstep (generation.experts: parallel/expert_lockstep.h).
// Checkpoint state: rl/learner_state.h, shared with the CPU engine.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>

#include "rl/device_memory_plan.h"
#include "roles/rank_roles.h"
#include "runtime/error.h"
#include "runtime/log.h"

#if HONE_CUDA

#include "comm/host_collectives.h"
#include "comm/nccl_comm.h"
#include "cuda/check.h"
#include "generation/gpu_generator.h"
#include "model/moe_feed_forward.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "model/transformer.h"
#include "parallel/embedding_group.h"
#include "parallel/generation_layout.h"
#include "parallel/pipeline_model.h"
#include "parallel/reshard.h"
#include "parallel/tensor_parallel.h"
#include "parallel/shard_weights.h"
#include "rl/gpu_expert_engine.h"
#include "rl/gpu_memory_check.h"
#include "rl/learner_optimizer.h"
#include "rl/learner_state.h"
#include "rl/policy_loss_pass.h"
#include "rl/training_passes.h"
#include "backend/gpu_device_select.h"
#include "backend/offloadable_weights.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_reducer.h"
#include "train/sharded_adamw.h"

namespace hone::rl {
namespace {

using Clock = std::chrono::steady_clock;

class GpuPolicyEngine final : public roles::RoleEngine {
 public:
  GpuPolicyEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial, const ParallelState& ps)
      : s_(s),
        mc_(mc),
        ps_(ps),
        device_(select_rank_device().device),
        ctx_(cuda::create_gpu_context(device_)),
        pipe_(PipelineLayout::of(mc.num_hidden_layers, ps.pp_size(), s.vpp, s.pp_layers)),
        stage_(ShardLayout::of(mc, ps.tp_size(), ps.tp_rank(), &pipe_, ps.pp_rank(), ps.ep_size(), ps.ep_rank())),
        gen_layout_(GenerationLayout::of(ps.grid(), s.generation_tp)),
        layout_(stage_.param_layout()) {
    NcclOptions o;
    o.timeout_s = s.nccl_timeout_s;
    o.stream = ctx_.stream;  // the groups' collectives are ordered with the layers' kernels
    if (ps_.ep_size() > 1) {
      HONE_CHECK(!pipe_.split() && ps_.cp_size() == 1 && gen_layout_.same_as_training,
                 "expert parallelism with pipeline or context parallelism or a generation layout of its own");
      ep_comm_ = ps_.device(CommGroup::ep, o);
      ep_ = std::make_unique<GpuExpertParallel>(mc_, ps_.ep(), *ep_comm_, ctx_, ps_.tp_size(), ps_.tp_rank());
    }
    if (ps_.tp_size() > 1) {
      // The tp group's collectives are ordered with the layers' kernels: they run on the engine's stream, and the
      // host does not wait for each (stream-ordered; the watchdog thread watches them).
      NcclOptions to = o;
      to.stream_ordered = true;
      tp_comm_ = ps_.device(CommGroup::tp, to);
      SequenceParallelism sp;
      sp.on = s.sequence_parallel;
      sp.overlap = s.tp_comm_overlap;
      sp.chunks = s.tp_comm_overlap_chunks;
      tp_ = std::make_unique<GpuTensorParallel>(mc_, *tp_comm_, ctx_, sp, &stage_);
      if (ep_) gen_tp_ = std::make_unique<GpuTensorParallel>(mc_, *tp_comm_, ctx_);  // generation: every expert
    }
    if (ps_.cp_size() > 1) {  // the ring's transfers run on a stream of its own; the all-gathers on the engine's
      NcclOptions o;
      o.timeout_s = s.nccl_timeout_s;
      o.stream = ctx_.stream;
      cp_comm_ = ps_.device(CommGroup::cp, o);
      cp_ = std::make_unique<GpuContextParallel>(*cp_comm_, ctx_);
    }
    HONE_CHECK(initial.flat.numel() == layout_.num_params, "initial weights of ", initial.flat.numel(),
               " parameters, this rank's ", tp_ || pipe_.split() ? "shard" : "model", " has ", layout_.num_params);
    const int max_tokens = int(s.max_tokens_per_microbatch);
    train_w_ = std::make_unique<OffloadableWeights>(layout_.num_params);
    CudaBackend::upload_weights(ctx_, train_w_->get(), initial.flat.f32(), layout_.num_params);
    if (s.loss.kl_coef > 0) {
      ref_w_ = std::make_unique<OffloadableWeights>(layout_.num_params);
      CudaBackend::upload_weights(ctx_, ref_w_->get(), initial.flat.f32(), layout_.num_params);
    }
    if (pipe_.split()) {
      pp_comm_ = ps_.device(CommGroup::pp, o);
      pipeline_ = std::make_unique<GpuPipelineModel>(mc_, stage_, train_w_->get(), ctx_, max_tokens, tp_.get(),
                                                     *pp_comm_);
      pipeline_->set_recompute(s.recompute);
      if (ref_w_)
        ref_pipeline_ = std::make_unique<GpuPipelineModel>(mc_, stage_, ref_w_->get(), ctx_, max_tokens, tp_.get(),
                                                           *pp_comm_);
    } else {
      policy_ = std::make_unique<GpuTransformer>(mc_, layout_, ctx_, max_tokens, tp_.get(), ModelSpan{},
                                                 train_w_->get(), cp_.get(), ep_.get());
      policy_->set_recompute(s.recompute);
      if (ref_w_)
        reference_ = std::make_unique<GpuTransformer>(mc_, layout_, ctx_, max_tokens, tp_.get(), ModelSpan{},
                                                      ref_w_->get(), cp_.get(), ep_.get());
    }
    if (ep_ && generation_splits_experts(s.generation_experts, *ep_, ps_.world())) {
      // Generation on the training weights, this rank's experts only: the group's passes in lockstep.
      gen_lockstep_ = std::make_unique<ExpertLockstep>(ps_.ep());
      make_generator(layout_, train_w_->get(), tp_.get());
    } else if (ep_) {
      // Generation reads a buffer with every expert, filled in connect() and at every refit (collective).
      gen_w_ = every_expert_weights(*ep_);
      make_generator(ep_->full_layout().param_layout(), gen_w_->get(), gen_tp_.get());
    } else if (gen_layout_.same_as_training) {
      make_generator(layout_, train_w_->get(), tp_.get());
    }
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    loss_ = std::make_unique<PolicyLossPass<CudaBackend>>(ctx_);
    passes_ = std::make_unique<TrainingPasses<CudaBackend>>(mc_, CudaBackend::Exec{&ctx_},
                                                            ps_.ep_size() > 1 ? &ps_.ep() : nullptr, s_.router_replay);
    if (pipe_.split()) stats_.schedule = PipelineSchedule{pipe_.pp(), pipe_.vpp(), 0, false}.name();
  }

  ~GpuPolicyEngine() override {
    reducer_.reset();
    passes_.reset();
    loss_.reset();
    generator_.reset();
    resharder_.reset();
    gen_w_.reset();
    gen_tp_.reset();
    gen_comm_.reset();
    world_comm_.reset();
    gen_group_.reset();
    optimizer_.reset();
    dp_comm_.reset();
    emb_comm_.reset();
    emb_group_.reset();
    ref_pipeline_.reset();
    pipeline_.reset();
    reference_.reset();
    policy_.reset();
    cp_.reset();
    cp_comm_.reset();
    ref_w_.reset();
    train_w_.reset();
    tp_.reset();
    tp_comm_.reset();
    pp_comm_.reset();
    ep_.reset();
    ep_comm_.reset();
    edp_comm_.reset();
    cuda::destroy_gpu_context(ctx_);
  }

  std::string describe() const override {
    std::string d = cat("cuda:", device_, " ", name_, ", bf16");
    if (tp_) {
      d += cat(", tensor parallel over ", tp_->size(), " GPUs (NCCL");
      if (tp_->sequence_parallel())
        d += s_.tp_comm_overlap ? cat("; sequence parallel, overlapped in ", s_.tp_comm_overlap_chunks, " chunks")
                                : std::string("; sequence parallel");
      d += ")";
    }
    if (pipe_.split())
      d += cat(", pipeline parallel over ", pipe_.pp(), " stages",
               pipe_.vpp() > 1 ? cat(" (interleaved 1F1B, ", pipe_.vpp(), " chunks each)") : std::string(" (1F1B)"));
    if (cp_) d += cat(", context parallel over ", cp_->size(), " GPUs (ring attention over NCCL)");
    if (ep_)
      d += cat(", expert parallel over ", ep_->size(), " GPUs (NCCL; ",
               gen_lockstep_ ? "generation too, in lockstep)" : "generation with every expert)");
    if (!gen_layout_.same_as_training)
      d += cat(", generation on ", gen_layout_.replicas(), gen_layout_.replicas() == 1 ? " replica" : " replicas",
               " of ", gen_layout_.tg, " GPU", gen_layout_.tg > 1 ? "s" : "", " (resharding refit)");
    if (optimizer_ranks() > 1)
      d += cat(", gradients over NCCL (", optimizer_ranks(), " ranks, ",
               zero_ ? "distributed optimizer: reduce-scatter, sharded AdamW, bf16 all-gather"
                     : "all-reduce, AdamW on every rank",
               s_.grad_reduce_in_fp32 ? ", fp32" : ", bf16", " reduction)");
    return d;
  }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

  // With one data-parallel rank the distributed optimizer is the plain one (one rank's shard is everything).
  void connect(const ModelWeights& initial) override {
    HONE_CHECK(!optimizer_, "connect() twice");
    const int ranks = optimizer_ranks();
    zero_ = s_.distributed_optimizer && ranks > 1;
    check_gpu_memory_fits(s_, mc_, ps_, pipe_, gen_layout_, ranks, zero_, policy_.get(), pipeline_.get(),
                          cat("cuda:", device_, " ", name_), ep_ && gen_w_);
    NcclOptions o;
    o.timeout_s = s_.nccl_timeout_s;
    // dp, or dp x cp: the ranks holding the same weights
    if (ranks > 1) dp_comm_ = ps_.device(cp_ ? CommGroup::dp_cp : CommGroup::dp, o);
    // The clipping norm over the model's shards and the experts' group (rl/learner_optimizer.h, shared with the CPU
    // engine); under expert parallelism the experts' gradients cross the expert-data-parallel group over NCCL.
    if (ep_ && ps_.edp_size() > 1) {
      NcclOptions eo;
      eo.timeout_s = s_.nccl_timeout_s;
      edp_comm_ = ps_.device(CommGroup::edp, eo);
    }
    const CudaBackend::Exec x(ctx_);
    DataParallelOptions po = learner_optimizer_options<CudaBackend>(stage_, ps_, tp_.get(), pipe_.split(),
                                                                    ep_ != nullptr, edp_comm_.get(), x,
                                                                    s_.grad_reduce_in_fp32);
    po.layout = &layout_;  // buckets in backward's order: the reducer launches them while backward runs
    if (zero_)
      optimizer_ = std::make_unique<ShardedAdamW<CudaBackend>>(initial, s_.adamw, *dp_comm_, po, x);
    else
      optimizer_ = std::make_unique<AllReduceAdamW<CudaBackend>>(initial, s_.adamw, dp_comm_.get(), po, x);
    if (optimizer_->reduces()) {
      reducer_ = std::make_unique<GradReducer<CudaBackend>>(*optimizer_, layout_, x);
      if (policy_) reducer_->attach(*policy_);
    }
    o.stream = ctx_.stream;
    if (pipe_.split()) {
      // Collective over the world: the first and last stages' pairs (a tied embedding's two copies).
      emb_group_ = std::make_unique<EmbeddingGroup>(ps_.grid(), ps_.world_rank());
      const ParamShard* tied = stage_.try_find("model.embed_tokens.weight");
      if (emb_group_->member() && tied && tied->tied_across_stages()) {
        emb_comm_ = std::make_unique<NcclComm>(emb_group_->host(), o);
        tied_ = tied;
      }
    }
    if (!gen_layout_.same_as_training) {
      // Collective over the world: the replica's communicator, its shard of every layer, the resharding plan.
      gen_group_ = std::make_unique<GenerationGroup>(ps_.grid(), gen_layout_.tg);
      const ShardLayout gen = ShardLayout::of(mc_, gen_layout_.tg, gen_layout_.rank_in_replica(ps_.world_rank()));
      if (gen_layout_.tg > 1) {
        gen_comm_ = std::make_unique<NcclComm>(gen_group_->host(), o);
        gen_tp_ = std::make_unique<GpuTensorParallel>(mc_, *gen_comm_, ctx_);
      }
      gen_w_ = std::make_unique<DeviceArray<bf16>>(gen.num_local_params(), "generation weights");
      CUDA_CHECK(cudaMemsetAsync(gen_w_->get(), 0, gen_w_->bytes(), ctx_.stream));  // vocabulary padding stays 0
      world_comm_ = ps_.device(CommGroup::world, o);
      resharder_ = std::make_unique<Resharder<CudaBackend>>(
          plan_reshard(mc_, ps_.grid(), pipe_, gen_layout_.tg, ps_.world_rank()), *world_comm_, ctx_);
      make_generator(gen.param_layout(), gen_w_->get(), gen_tp_.get());
      resharder_->run(train_w_->get(), gen_w_->get());
      CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    }
    if (ep_ && gen_w_) ep_->gather_experts(train_w_->get(), gen_w_->get());
    log_debug("GPU optimizer: ", optimizer_->zero_layout().buckets().size(), " gradient buckets, ",
              optimizer_->device_bytes() / double(1 << 30), " GiB of optimizer state and gradients on the device");
  }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    // The activation arenas and the (zero) gradients are not needed until the logprob and training phases: their
    // memory goes to the KV cache.
    release_arenas();
    loss_->release();
    optimizer_->release_grads();
    const Clock::time_point t0 = Clock::now();
    if (s_.optimizer_offload || s_.offload_during_generation) optimizer_->offload_state();
    if (s_.offload_during_generation && !gen_layout_.same_as_training) {
      // The training (and reference) copies are idle until the logprob phase: generation has its own.
      train_w_->offload(ctx_.stream);
      if (ref_w_) ref_w_->offload(ctx_.stream);
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
      train_w_->reload(ctx_.stream);
      if (policy_) policy_->set_shared_weights(train_w_->get());
      if (pipeline_) pipeline_->set_weights(train_w_->get());
    }
    if (ref_w_ && ref_w_->offloaded()) {
      ref_w_->reload(ctx_.stream);
      if (reference_) reference_->set_shared_weights(ref_w_->get());
      if (ref_pipeline_) ref_pipeline_->set_weights(ref_w_->get());
    }
    if (s_.offload_during_generation) stats_.offload_s += seconds_since(t0);
  }

  void logprobs(Weights role, const PackedBatch& batch, float temperature, const int32_t* forced_routing,
                float* out) override {
    HONE_CHECK(role == Weights::policy || ref_w_, "no reference model (loss.kl_coef = 0)");
    HONE_CHECK(!pipeline_, "a pipeline's logprobs come from its pass over the stages (logprobs_batches)");
    GpuTransformer& m = role == Weights::policy ? *policy_ : *reference_;
    const MoeRouting r = passes_->logprob_routing(m.moe() ? forced_routing : nullptr, batch.num_tokens());
    m.forward(batch, temperature, /*need_entropy=*/false, /*need_backward=*/false, /*input=*/nullptr, r);
    const CudaBackend::Exec x(ctx_);
    CudaBackend::download(x, out, m.logprobs(), size_t(batch.num_tokens()) * sizeof(float));  // straight to the host
    CudaBackend::sync(x);
    mem_.logprob = std::max(mem_.logprob, persistent() + arena_bytes());
    note_device_use();
  }

  // Under pipeline parallelism: one forward-only pass through the stages, the last stage's logprobs broadcast.
  void logprobs_batches(Weights role, const std::vector<const PackedBatch*>& batches, float temperature,
                        const std::vector<const int32_t*>& forced_routing,
                        const std::vector<std::vector<float>*>& out) override {
    if (!pipeline_) return RoleEngine::logprobs_batches(role, batches, temperature, forced_routing, out);
    HONE_CHECK(role == Weights::policy || ref_pipeline_, "no reference model (loss.kl_coef = 0)");
    GpuPipelineModel& m = role == Weights::policy ? *pipeline_ : *ref_pipeline_;
    pipeline_logprobs(m, batches, temperature, ps_.pp(), out);  // rl/training_passes.h
    mem_.logprob = std::max(mem_.logprob, persistent() + arena_bytes());
    note_device_use();
  }

  // Training starts: the reference model's arena (logprob phase only) goes back first. The loss runs on the device
  // between each forward and backward; the host waits once, for the metrics, after the last backward.
  std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& mbs, const TrainLoss& loss) override {
    validate_policy_loss_config(loss.config);
    if (reference_) reference_->release_arenas();
    if (ref_pipeline_) ref_pipeline_->release();
    optimizer_->zero_grads();
    loss_->reserve(mbs);
    const bool entropy_grad = loss.config.entropy_coef != 0;
    if (pipeline_) {  // a stage whose tied embedding is summed over its two copies first reduces in the optimizer step
      auto metrics = train_pipeline(*pipeline_, *loss_, mbs, loss, entropy_grad, optimizer_->grads(),
                                    emb_comm_ ? nullptr : reducer_.get(), ps_.pp(), stats_);
      mem_.training = std::max(mem_.training, persistent() + arena_bytes() + double(loss_->bytes()));
      note_device_use();
      return metrics;
    }
    // The passes (rl/training_passes.h); the last backward reduces the gradients over the data-parallel ranks while
    // it runs.
    TrainingPassHooks hooks;
    if (reducer_) hooks.before_last_backward = [&] { reducer_->arm(); };
    hooks.after_pass = [&](int64_t) {
      mem_.training = std::max(mem_.training, persistent() + arena_bytes() + double(loss_->bytes()));
      note_device_use();
    };
    if (wants_pass_progress()) hooks.progress = [this](int64_t done) { passes_done(done); };
    return passes_->run(*policy_, *loss_, mbs, loss, optimizer_->grads(), hooks);
  }

  double optimizer_step(float lr, double max_grad_norm, bool last_of_step) override {
    HONE_CHECK(optimizer_, "optimizer step before connect()");
    // The buckets launched during the last backward; a rank with no micro-batch in this optimizer step reduces
    // them all inside update(), in the same bucket order.
    if (reducer_ && reducer_->armed()) reducer_->wait_all();
    if (tp_) tp_->sum_partial_gradients(optimizer_->grads());  // parameters several ranks hold: gradients add up
    if (emb_comm_) {  // a tied embedding's two stage copies: their gradients summed over the pair
      float* g = optimizer_->grads() + tied_->offset;
      emb_comm_->all_reduce_sum(g, tied_->local_numel());
    }
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
      stats_.refit_bytes += double(resharder_->plan().elements_received) * sizeof(bf16);
    }
    mem_.refit = std::max(mem_.refit, persistent());
  }

  Comm* lockstep_group() const override { return ep_ ? &ps_.ep() : nullptr; }
  MoeStepStats take_moe_stats() override { return passes_->take_moe_stats(); }

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

  // Checkpoints are whole and independent of tp, pp and dp: the dp-rank-0 ranks download their shard and, under tp
  // or pp, gather the shards over the host tp and pp groups onto world rank 0, one parameter at a time
  // (rl/learner_state.h, shared with the CPU engine).
  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    const bool dp_root = (cp_ ? ps_.dp_cp_rank() : ps_.dp_rank()) == 0;  // rank 0 of the optimizer's group
    read_learner_state<CudaBackend>(mc_, ps_, stage_, tp_ || pipe_.split(), ep_.get(), dp_root, *optimizer_, master,
                                    m, v);
  }
  void write_state(const ModelWeights& master, const float* m, const float* v, int step_count) override {
    HONE_CHECK(master.flat.numel() == count_parameters(mc_), "checkpoint weights do not match the model");
    write_learner_state<CudaBackend>(mc_, stage_, tp_ || pipe_.split() || ep_, *optimizer_, master, m, v,
                                     step_count);  // this rank's slices
    optimizer_->refit(train_w_->get());
    if (ep_ && gen_w_) ep_->gather_experts(train_w_->get(), gen_w_->get());  // collective: every rank restores
    if (resharder_) resharder_->run(train_w_->get(), gen_w_->get());  // collective: every rank restores
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

 private:
  void make_generator(const ParamLayout& layout, const bf16* weights, GpuTensorParallel* tp) {
    GpuGenerationOptions go;
    go.kv_cache_gib = s_.kv_cache_gib;
    go.kv_cache_memory_fraction = s_.kv_cache_memory_fraction;
    go.block_size = s_.kv_block_size;
    go.cuda_graphs = s_.cuda_graphs;
    go.keep_graphs = s_.keep_graphs;
    // A replica generates its share of the step's groups.
    go.max_num_seqs = int(std::max<int64_t>(1, std::min<int64_t>(1024, s_.rollouts_per_step() / gen_layout_.replicas())));
    generator_ = std::make_unique<GpuGenerator>(mc_, layout, weights, ctx_, go, tp,
                                                gen_lockstep_ ? ep_.get() : nullptr, gen_lockstep_.get());
    if (gen_progress_) generator_->set_progress(gen_progress_);
  }

  void release_arenas() {
    if (policy_) policy_->release_arenas();
    if (reference_) reference_->release_arenas();
    if (pipeline_) pipeline_->release();
    if (ref_pipeline_) ref_pipeline_->release();
  }

  static double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
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
  // The driver's count of device memory in use (libraries' workspaces and the CUDA context included).
  void note_device_use() { mem_.device = std::max(mem_.device, double(cuda::device_memory_info().used_bytes())); }

  GrpoSettings s_;
  ModelConfig mc_;
  const ParallelState& ps_;
  int device_ = 0;
  cuda::GpuContext ctx_;
  PipelineLayout pipe_;
  ShardLayout stage_;  // this rank's shard of its stage (the whole model's shard at pp = 1)
  GenerationLayout gen_layout_;
  ParamLayout layout_;
  std::string name_;
  std::unique_ptr<OffloadableWeights> train_w_, ref_w_;           // bf16 compute weights of the roles
  std::unique_ptr<GpuTransformer> policy_, reference_;            // pp = 1
  std::unique_ptr<GpuPipelineModel> pipeline_, ref_pipeline_;     // pp > 1
  std::unique_ptr<GpuGenerator> generator_;
  GenerationProgressFn gen_progress_;
  std::unique_ptr<NcclComm> dp_comm_, tp_comm_, cp_comm_, pp_comm_, emb_comm_, gen_comm_, world_comm_;
  std::unique_ptr<GpuTensorParallel> tp_;      // parallel.tp > 1
  std::unique_ptr<GpuContextParallel> cp_;     // parallel.cp > 1
  std::unique_ptr<EmbeddingGroup> emb_group_;  // pp > 1
  const ParamShard* tied_ = nullptr;           // the tied embedding of this stage, summed over emb_comm_
  std::unique_ptr<GenerationGroup> gen_group_;  // a generation layout of its own
  std::unique_ptr<GpuTensorParallel> gen_tp_;      // generation's tp group: its replica's, or every expert's
  std::unique_ptr<DeviceArray<bf16>> gen_w_;       // generation's weights when they are not the training copy
  std::unique_ptr<ExpertLockstep> gen_lockstep_;   // generation.experts = parallel: generation's experts split too
  std::unique_ptr<NcclComm> ep_comm_, edp_comm_;   // parallel.ep > 1
  std::unique_ptr<GpuExpertParallel> ep_;
  std::unique_ptr<Resharder<CudaBackend>> resharder_;
  std::unique_ptr<DataParallelOptimizer<CudaBackend>> optimizer_;
  std::unique_ptr<GradReducer<CudaBackend>> reducer_;
  std::unique_ptr<PolicyLossPass<CudaBackend>> loss_;
  std::unique_ptr<TrainingPasses<CudaBackend>> passes_;  // pp = 1: the passes, a mixture of experts' routing tables
  bool zero_ = false;
  EngineMemory mem_;
  EngineStepStats stats_;
};

}  // namespace

std::unique_ptr<roles::RoleEngine> make_gpu_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                   const ModelWeights& initial, const ParallelState& ps) {
  return std::make_unique<GpuPolicyEngine>(s, mc, initial, ps);
}

}  // namespace hone::rl

#else  // !HONE_CUDA

namespace hone::rl {

std::unique_ptr<roles::RoleEngine> make_gpu_engine(const GrpoSettings&, const ModelConfig&, const ModelWeights&,
                                                   const ParallelState&) {
  throw UserError("run.device = \"cuda\": this hone was built without CUDA (rebuild with CUDA=1, or run.device = \"cpu\")");
}

}  // namespace hone::rl

#endif  // HONE_CUDA
