// The GPU policy engine (run.device = "cuda"), one GPU per rank, colocated: one bf16 copy of the policy weights
// serves training, the logprob pass and generation (refit casts the fp32 master weights into it in place, so the
// decode CUDA graphs stay valid); a second bf16 copy is the frozen reference when the KL term needs it; fp32
// master weights, gradients and Adam moments live in GpuAdamW. Memory is handed from phase to phase: the
// activation arenas are freed before generation and the KV cache after it; with train.optimizer_offload the Adam
// moments wait in pinned host memory while generation runs.
#include <algorithm>
#include <cstring>

#include "rl/grpo_dp.h"
#include "rl/policy_engine.h"
#include "runtime/error.h"

#if HONE_CUDA

#include "cuda/check.h"
#include "cuda/device_select.h"
#include "generation/gpu_generator.h"
#include "model/gpu_transformer.h"
#include "train/gpu_optimizer.h"

namespace hone::rl {
namespace {

class GpuPolicyEngine final : public PolicyEngine {
 public:
  GpuPolicyEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial)
      : s_(s), mc_(mc), device_(select_rank_device().device), ctx_(cuda::create_gpu_context(device_)) {
    const GpuParamLayout layout = GpuParamLayout::of(initial);
    const int max_tokens = int(s.max_tokens_per_microbatch);
    policy_ = std::make_unique<GpuTransformer>(mc_, layout, ctx_, max_tokens);
    policy_->set_recompute(s.activation_recompute);
    policy_->upload_weights(initial);
    if (s.loss.kl_coef > 0) {
      reference_ = std::make_unique<GpuTransformer>(mc_, layout, ctx_, max_tokens);
      reference_->upload_weights(initial);
    }
    optimizer_ = std::make_unique<GpuAdamW>(initial, s.adamw, ctx_);
    optimizer_->load_master(initial);
    GpuGenerationOptions go;
    go.kv_cache_gib = s.kv_cache_gib;
    go.kv_cache_memory_fraction = s.kv_cache_memory_fraction;
    go.block_size = s.kv_block_size;
    go.cuda_graphs = s.cuda_graphs;
    go.max_num_seqs = int(std::max<int64_t>(1, std::min<int64_t>(1024, s.rollouts_per_step() / dp::size())));
    generator_ = std::make_unique<GpuGenerator>(mc_, layout, policy_->weights(), ctx_, go);
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    name_ = prop.name;
    weights_bytes_ = double(layout.num_params) * 2 * (reference_ ? 2 : 1);
  }

  ~GpuPolicyEngine() override {
    generator_.reset();
    optimizer_.reset();
    reference_.reset();
    policy_.reset();
    cuda::destroy_gpu_context(ctx_);
  }

  std::string describe() const override { return cat("cuda:", device_, " ", name_, ", bf16"); }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    // The activation arenas are not needed until the logprob phase: their memory goes to the KV cache.
    policy_->release_arenas();
    if (reference_) reference_->release_arenas();
    if (s_.optimizer_offload) optimizer_->offload_state();
    auto r = generator_->generate(requests, sampling, stop, seed, step, max_total, decode);
    peak_kv_ = std::max(peak_kv_, int64_t(generator_->stats().peak_kv_bytes));
    mem_.generation = std::max(mem_.generation, persistent() + double(generator_->stats().peak_kv_bytes));
    return r;
  }
  int64_t last_peak_kv_bytes() const override { return int64_t(generator_->stats().peak_kv_bytes); }
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
    return lp_;
  }

  void zero_grads() override { optimizer_->zero_grads(); }

  void forward_train(const PackedBatch& batch, float temperature, std::span<const float>& lp,
                     std::span<const float>& ent) override {
    policy_->forward(batch, temperature, /*need_entropy=*/true, /*need_backward=*/true);
    lp_ = policy_->logprobs_host();
    ent_ = policy_->entropy_host();
    lp = lp_;
    ent = ent_;
  }
  void backward(const float* dlp, const float* dent) override {
    const size_t T = lp_.size();
    dlp_.assign(dlp, dlp + T);
    if (dent) dent_.assign(dent, dent + T);
    policy_->backward_host(dlp_, dent ? &dent_ : nullptr, optimizer_->grads());
    mem_.training = std::max(mem_.training, persistent() + arena_bytes());
  }

  double optimizer_step(float lr, double max_grad_norm) override {
    if (dp::size() > 1) {
      // Gradients summed over the data-parallel ranks through host memory (MPI).
      const int64_t n = optimizer_->num_params();
      host_grads_.resize(size_t(n));
      CUDA_CHECK(cudaMemcpyAsync(host_grads_.data(), optimizer_->grads(), size_t(n) * 4, cudaMemcpyDeviceToHost,
                                 ctx_.stream));
      CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
      dp::sum(host_grads_.data(), n);
      CUDA_CHECK(cudaMemcpyAsync(optimizer_->grads(), host_grads_.data(), size_t(n) * 4, cudaMemcpyHostToDevice,
                                 ctx_.stream));
    }
    const GpuStepResult r = optimizer_->clip(max_grad_norm);
    optimizer_->adamw(lr);
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
  void reset_memory() override { mem_ = EngineMemory{}, peak_kv_ = 0; }

  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    const int64_t n = optimizer_->num_params();
    if (master.flat.numel() != n) master = allocate_weights(mc_);
    optimizer_->download_master(master);
    m = Tensor::empty({n});
    v = Tensor::empty({n});
    const bool off = optimizer_->state_offloaded();
    if (off) optimizer_->reload_state();
    CUDA_CHECK(cudaMemcpyAsync(m.f32(), optimizer_->exp_avg(), m.nbytes(), cudaMemcpyDeviceToHost, ctx_.stream));
    CUDA_CHECK(cudaMemcpyAsync(v.f32(), optimizer_->exp_avg_sq(), v.nbytes(), cudaMemcpyDeviceToHost, ctx_.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  void write_state(const ModelWeights& master, const float* m, const float* v, int step_count) override {
    const int64_t n = optimizer_->num_params();
    HONE_CHECK(master.flat.numel() == n, "checkpoint weights do not match the model");
    if (optimizer_->state_offloaded()) optimizer_->reload_state();
    optimizer_->load_master(master);
    CUDA_CHECK(cudaMemcpyAsync(optimizer_->exp_avg(), m, size_t(n) * 4, cudaMemcpyHostToDevice, ctx_.stream));
    CUDA_CHECK(cudaMemcpyAsync(optimizer_->exp_avg_sq(), v, size_t(n) * 4, cudaMemcpyHostToDevice, ctx_.stream));
    optimizer_->set_step_count(step_count);
    optimizer_->refit(policy_->weights());
    CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }

 private:
  double persistent() const { return weights_bytes_ + double(optimizer_->device_bytes()); }
  double arena_bytes() const {
    double b = double(policy_->forward_arena_capacity() + policy_->backward_arena_capacity());
    if (reference_) b += double(reference_->forward_arena_capacity() + reference_->backward_arena_capacity());
    return b;
  }

  GrpoSettings s_;
  ModelConfig mc_;
  int device_ = 0;
  cuda::GpuContext ctx_;
  std::string name_;
  std::unique_ptr<GpuTransformer> policy_, reference_;
  std::unique_ptr<GpuAdamW> optimizer_;
  std::unique_ptr<GpuGenerator> generator_;
  std::vector<float> lp_, ent_, dlp_, dent_, host_grads_;
  double weights_bytes_ = 0;
  int64_t peak_kv_ = 0;
  EngineMemory mem_;
};

}  // namespace

std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                     const ModelWeights& initial) {
  return std::make_unique<GpuPolicyEngine>(s, mc, initial);
}

}  // namespace hone::rl

#else  // !HONE_CUDA

namespace hone::rl {

std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings&, const ModelConfig&, const ModelWeights&) {
  throw UserError("run.device = \"cuda\": this hone was built without CUDA (rebuild with CUDA=1, or run.device = \"cpu\")");
}

}  // namespace hone::rl

#endif  // HONE_CUDA
