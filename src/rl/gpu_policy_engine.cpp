// The GPU policy engine (run.device = "cuda"), one GPU per rank, colocated: one bf16 copy of the policy weights
// serves training, the logprob pass and generation (refit casts the fp32 master weights into it in place, so the
// decode CUDA graphs stay valid); a second bf16 copy is the frozen reference when the KL term needs it. The fp32
// master weights, gradients and Adam moments live in the data-parallel optimizer: GpuDataParallelAdamW (whole state
// on every rank; gradients all-reduced over NCCL) or, with train.distributed_optimizer and more than one rank,
// GpuDistributedAdamW (ZeRO-1: reduce-scatter, sharded state, bf16 all-gather). With several ranks a GradReducer
// launches each bucket's reduction as soon as the last micro-batch's backward has finished it. The policy loss runs
// on the device between each training forward and backward (rl/gpu_policy_loss.h): logprobs and their gradients
// never leave the GPU; the loss metrics come back once per optimizer step.
// Memory is handed from phase to phase: the activation arenas and the gradient buffer are freed before generation
// and the KV cache after it; with train.optimizer_offload the Adam moments wait in pinned host memory while
// generation runs.
// Under tensor parallelism (parallel.tp > 1) every role holds this rank's shard (parallel/shard_layout.h), the models
// and the generator compute over the tp group's stream-ordered NcclComm on the engine's stream
// (parallel/gpu_tensor_parallel.h; sequence parallelism for training and logprobs, generation on whole rows),
// the optimizer works on the shard's flat buffer over dp with the clipping norm spanning the group, and checkpoints
// stay whole: read_state gathers the shards onto world rank 0 over the host tp group, write_state keeps this rank's
// slices.
#include <algorithm>
#include <cstring>

#include "rl/device_memory_plan.h"
#include "rl/policy_engine.h"
#include "runtime/error.h"
#include "runtime/log.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "runtime/gpu_device_select.h"
#include "comm/nccl_comm.h"
#include "generation/gpu_generator.h"
#include "parallel/gpu_tensor_parallel.h"
#include "parallel/shard_weights.h"
#include "model/gpu_transformer.h"
#include "rl/gpu_policy_loss.h"
#include "train/gpu_data_parallel_adamw.h"
#include "train/gpu_distributed_adamw.h"
#include "train/grad_reducer.h"

namespace hone::rl {
namespace {

class GpuPolicyEngine final : public PolicyEngine {
 public:
  GpuPolicyEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial, const ParallelState& ps)
      : s_(s), mc_(mc), ps_(ps), device_(select_rank_device().device), ctx_(cuda::create_gpu_context(device_)),
        layout_(ParamLayout::of(mc)) {
    if (ps_.tp_size() > 1) {
      // The tp group's collectives are ordered with the layers' kernels: they run on the engine's stream, and the
      // host does not wait for each (stream-ordered; the watchdog thread watches them).
      NcclOptions o;
      o.timeout_s = s.nccl_timeout_s;
      o.stream = ctx_.stream;
      o.stream_ordered = true;
      tp_comm_ = ps_.device(CommGroup::tp, o);
      SequenceParallelism sp;
      sp.on = s.sequence_parallel;
      sp.overlap = s.tp_comm_overlap;
      sp.chunks = s.tp_comm_overlap_chunks;
      tp_ = std::make_unique<GpuTensorParallel>(mc_, *tp_comm_, ctx_, sp);
      layout_ = tp_->layout().param_layout();
    }
    HONE_CHECK(initial.flat.numel() == layout_.num_params, "initial weights of ", initial.flat.numel(),
               " parameters, this rank's ", tp_ ? "shard" : "model", " has ", layout_.num_params);
    const int max_tokens = int(s.max_tokens_per_microbatch);
    policy_ = std::make_unique<GpuTransformer>(mc_, layout_, ctx_, max_tokens, tp_.get());
    policy_->set_recompute(s.activation_recompute);
    policy_->upload_weights(initial);
    if (s.loss.kl_coef > 0) {
      reference_ = std::make_unique<GpuTransformer>(mc_, layout_, ctx_, max_tokens, tp_.get());
      reference_->upload_weights(initial);
    }
    GpuGenerationOptions go;
    go.kv_cache_gib = s.kv_cache_gib;
    go.kv_cache_memory_fraction = s.kv_cache_memory_fraction;
    go.block_size = s.kv_block_size;
    go.cuda_graphs = s.cuda_graphs;
    go.max_num_seqs = int(std::max<int64_t>(1, std::min<int64_t>(1024, s.rollouts_per_step() / ps_.dp_size())));
    generator_ = std::make_unique<GpuGenerator>(mc_, layout_, policy_->weights(), ctx_, go, tp_.get());
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    weights_bytes_ = double(layout_.num_params) * 2 * (reference_ ? 2 : 1);
    loss_ = std::make_unique<GpuPolicyLoss>(ctx_);
  }

  ~GpuPolicyEngine() override {
    reducer_.reset();
    loss_.reset();
    generator_.reset();
    optimizer_.reset();
    dp_comm_.reset();
    reference_.reset();
    policy_.reset();
    tp_.reset();
    tp_comm_.reset();
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
    if (ps_.dp_size() > 1)
      d += cat(", gradients over NCCL (", ps_.dp_size(), " ranks, ",
               zero_ ? "distributed optimizer: reduce-scatter, sharded AdamW, bf16 all-gather"
                     : "all-reduce, AdamW on every rank",
               s_.grad_reduce_in_fp32 ? ", fp32" : ", bf16", " reduction)");
    return d;
  }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

  // With one data-parallel rank the distributed optimizer is the plain one (one rank's shard is everything).
  void connect(const ModelWeights& initial) override {
    HONE_CHECK(!optimizer_, "connect() twice");
    const int ranks = ps_.dp_size();
    zero_ = s_.distributed_optimizer && ranks > 1;
    check_memory_fits(ranks);
    if (ranks > 1) {
      NcclOptions o;
      o.timeout_s = s_.nccl_timeout_s;
      dp_comm_ = ps_.device(CommGroup::dp, o);
    }
    GpuDataParallelOptions po;
    po.grad_reduce_in_fp32 = s_.grad_reduce_in_fp32;
    if (tp_) po.norm = tp_->sharded_norm();
    if (zero_)
      optimizer_ = std::make_unique<GpuDistributedAdamW>(initial, layout_, s_.adamw, ctx_, *dp_comm_, po);
    else
      optimizer_ = std::make_unique<GpuDataParallelAdamW>(initial, layout_, s_.adamw, ctx_, dp_comm_.get(), po);
    if (optimizer_->reduces()) {
      reducer_ = std::make_unique<GradReducer>(*optimizer_, layout_, ctx_);
      reducer_->attach(*policy_);
    }
    log_debug("GPU optimizer: ", optimizer_->zero_layout().buckets().size(), " gradient buckets, ",
              optimizer_->device_bytes() / double(1 << 30), " GiB of optimizer state and gradients on the device");
  }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    // The activation arenas and the (zero) gradients are not needed until the logprob and training phases: their
    // memory goes to the KV cache.
    policy_->release_arenas();
    if (reference_) reference_->release_arenas();
    loss_->release();
    optimizer_->release_grads();
    if (s_.optimizer_offload) optimizer_->offload_state();
    auto r = generator_->generate(requests, sampling, stop, seed, step, max_total, decode);
    mem_.generation = std::max(mem_.generation, persistent() + double(generator_->stats().peak_kv_bytes));
    note_device_use();
    return r;
  }
  void set_generation_progress(GenerationProgressFn fn) override { generator_->set_progress(std::move(fn)); }
  void end_generation() override {
    generator_->release();
    if (optimizer_->state_offloaded()) optimizer_->reload_state();
  }

  std::span<const float> logprobs(Role role, const PackedBatch& batch, float temperature) override {
    HONE_CHECK(role == Role::policy || reference_, "no reference model (loss.kl_coef = 0)");
    GpuTransformer& m = role == Role::policy ? *policy_ : *reference_;
    m.forward(batch, temperature, /*need_entropy=*/false, /*need_backward=*/false);
    lp_ = m.logprobs_host();
    mem_.logprob = std::max(mem_.logprob, persistent() + arena_bytes());
    note_device_use();
    return lp_;
  }

  // Training starts: the reference model's arena (logprob phase only) goes back first. The loss runs on the device
  // between each forward and backward; the host waits once, for the metrics, after the last backward.
  std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& mbs, const TrainLoss& loss) override {
    validate_policy_loss_config(loss.config);
    if (reference_) reference_->release_arenas();
    optimizer_->zero_grads();
    loss_->reserve(mbs);
    const bool entropy_grad = loss.config.entropy_coef != 0;
    for (size_t i = 0; i < mbs.size(); ++i) {
      policy_->forward(mbs[i].batch, loss.temperature, /*need_entropy=*/true, /*need_backward=*/true);
      const GpuPolicyLoss::Gradients g = loss_->run(i, mbs[i], loss, policy_->logprobs(), policy_->entropy());
      if (reducer_ && i + 1 == mbs.size()) reducer_->arm();
      policy_->backward(g.dlogprob, entropy_grad ? g.dentropy : nullptr, optimizer_->grads());
      mem_.training = std::max(mem_.training, persistent() + arena_bytes() + double(loss_->device_bytes()));
      note_device_use();
    }
    return loss_->metrics(mbs.size());
  }

  double optimizer_step(float lr, double max_grad_norm, bool last_of_step) override {
    HONE_CHECK(optimizer_, "optimizer step before connect()");
    // The buckets launched during the last backward; a rank with no micro-batch in this optimizer step reduces
    // them all inside update(), in the same bucket order.
    if (reducer_ && reducer_->armed()) reducer_->wait_all();
    if (tp_) tp_->sum_partial_gradients(optimizer_->grads());  // parameters several ranks hold: gradients add up
    const GpuStepResult r = optimizer_->update(lr, max_grad_norm);
    if (!last_of_step) optimizer_->refit(policy_->weights());  // the next micro-batches train on the new weights
    return r.grad_norm;
  }
  int optimizer_step_count() const override { return optimizer_->step_count(); }

  void refit() override {
    optimizer_->refit(policy_->weights());
    mem_.refit = std::max(mem_.refit, persistent());
  }

  EngineMemory memory() const override {
    EngineMemory m = mem_;
    m.idle = persistent();
    m.refit = std::max(m.refit, m.idle);
    return m;
  }
  void reset_memory() override { mem_ = EngineMemory{}; }

  // Checkpoints are whole and independent of tp and dp: the dp-rank-0 ranks download their shard and, under tp,
  // gather the shards over the host tp group onto tp rank 0 (world rank 0), one parameter at a time.
  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    const int64_t n = optimizer_->num_params();
    const bool dp_root = ps_.dp_rank() == 0;
    if (!tp_) {
      if (dp_root) {
        if (master.flat.numel() != n) master = allocate_weights(mc_);
        m = Tensor::empty({n});
        v = Tensor::empty({n});
      }
      optimizer_->read_state(dp_root ? &master : nullptr, dp_root ? m.f32() : nullptr, dp_root ? v.f32() : nullptr, 0);
      return;
    }
    ModelWeights shard;
    std::vector<float> shard_m, shard_v;
    if (dp_root) {
      shard = allocate_shard_weights(tp_->layout(), mc_);
      shard_m.resize(size_t(n));
      shard_v.resize(size_t(n));
    }
    optimizer_->read_state(dp_root ? &shard : nullptr, shard_m.data(), shard_v.data(), 0);
    if (!dp_root) return;
    const bool root = ps_.tp_rank() == 0;
    const int64_t whole = count_parameters(mc_);
    if (root) {
      if (master.flat.numel() != whole) master = allocate_weights(mc_);
      m = Tensor::empty({whole});
      v = Tensor::empty({whole});
    }
    Comm& tp = ps_.tp();
    gather_shards_flat(mc_, tp_->layout(), shard.flat.f32(), tp, root ? master.flat.f32() : nullptr);
    gather_shards_flat(mc_, tp_->layout(), shard_m.data(), tp, root ? m.f32() : nullptr);
    gather_shards_flat(mc_, tp_->layout(), shard_v.data(), tp, root ? v.f32() : nullptr);
  }
  void write_state(const ModelWeights& master, const float* m, const float* v, int step_count) override {
    HONE_CHECK(master.flat.numel() == count_parameters(mc_), "checkpoint weights do not match the model");
    if (!tp_) {
      optimizer_->write_state(master, m, v, step_count);
    } else {
      // This rank's slices of the whole state.
      ModelWeights shard = allocate_shard_weights(tp_->layout(), mc_);
      extract_shard(tp_->layout(), master, shard);
      std::vector<float> shard_m(size_t(shard.flat.numel())), shard_v(size_t(shard.flat.numel()));
      extract_shard_flat(tp_->layout(), m, shard_m.data());
      extract_shard_flat(tp_->layout(), v, shard_v.data());
      optimizer_->write_state(shard, shard_m.data(), shard_v.data(), step_count);
    }
    optimizer_->refit(policy_->weights());
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

 private:
  // Before the optimizer is allocated: a run whose optimizer state, gradients and largest phase cannot fit next to
  // the weights ends now, on this rank (the runtime ends the others), with the numbers and the keys to change.
  void check_memory_fits(int ranks) const {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    DeviceMemoryPlan plan;
    set_tensor_parallel(plan, mc_, ps_.tp_size());  // this rank's shard of the parameters, not the model
    plan.dp = ranks;
    plan.distributed = zero_;
    plan.offload = s_.optimizer_offload;
    plan.microbatch_tokens = s_.max_tokens_per_microbatch;
    const int T = int(s_.max_tokens_per_microbatch);
    plan.activations = double(policy_->forward_bytes(T, true) + policy_->backward_bytes(T));
    plan.kv_cache = s_.kv_cache_gib * double(int64_t(1) << 30);
    const std::string refusal = device_memory_refusal(plan, double(free_b));
    if (!refusal.empty()) throw UserError(cat("cuda:", device_, " ", name_, ": ", refusal));
  }
  double persistent() const { return weights_bytes_ + double(optimizer_->device_bytes()); }
  double arena_bytes() const {
    double b = double(policy_->forward_arena_capacity() + policy_->backward_arena_capacity());
    if (reference_) b += double(reference_->forward_arena_capacity() + reference_->backward_arena_capacity());
    return b;
  }
  // The driver's count of device memory in use (libraries' workspaces and the CUDA context included).
  void note_device_use() { mem_.device = std::max(mem_.device, double(GpuTransformer::device_bytes_in_use())); }

  GrpoSettings s_;
  ModelConfig mc_;
  const ParallelState& ps_;
  int device_ = 0;
  cuda::GpuContext ctx_;
  ParamLayout layout_;
  std::string name_;
  std::unique_ptr<GpuTransformer> policy_, reference_;
  std::unique_ptr<GpuGenerator> generator_;
  std::unique_ptr<NcclComm> dp_comm_, tp_comm_;
  std::unique_ptr<GpuTensorParallel> tp_;  // parallel.tp > 1
  std::unique_ptr<GpuDataParallelOptimizer> optimizer_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<GpuPolicyLoss> loss_;
  bool zero_ = false;
  std::vector<float> lp_;
  double weights_bytes_ = 0;
  EngineMemory mem_;
};

}  // namespace

std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                     const ModelWeights& initial, const ParallelState& ps) {
  return std::make_unique<GpuPolicyEngine>(s, mc, initial, ps);
}

}  // namespace hone::rl

#else  // !HONE_CUDA

namespace hone::rl {

std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings&, const ModelConfig&, const ModelWeights&,
                                                     const ParallelState&) {
  throw UserError("run.device = \"cuda\": this hone was built without CUDA (rebuild with CUDA=1, or run.device = \"cpu\")");
}

}  // namespace hone::rl

#endif  // HONE_CUDA
