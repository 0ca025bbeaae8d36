// The CPU policy engine: fp32 weights in three roles (training = master, generation copy refitted every step,
// frozen reference when the KL term needs it), the hand-written Transformer and CpuGenerator; the data-parallel
// optimizer over the dp group's MpiComm (train/distributed_adamw.h): DataParallelAdamW (gradients all-reduced,
// whole AdamW state on every rank) or, with train.distributed_optimizer and more than one rank, DistributedAdamW
// (ZeRO-1: gradients reduce-scattered, master weights and moments sharded, weights all-gathered).
// Under tensor parallelism (parallel.tp > 1) every role holds this rank's shard (parallel/shard_weights.h), the
// models and the generator compute over the tp group (parallel/tensor_parallel.h), the optimizer works on the
// shard's flat buffer over dp with the gradient norm spanning the group, and checkpoints stay whole: read_state
// gathers the shards onto world rank 0, write_state takes this rank's slices of the whole state.
#include <algorithm>
#include <cstring>

#include "comm/comm.h"
#include "model/transformer.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "rl/policy_engine.h"
#include "runtime/error.h"
#include "train/adamw.h"
#include "train/distributed_adamw.h"

namespace hone::rl {
namespace {

class CpuPolicyEngine final : public PolicyEngine {
 public:
  CpuPolicyEngine(const GrpoSettings& s, const ModelConfig& mc, const ModelWeights& initial, const ParallelState& ps)
      : s_(s), mc_(mc), ps_(ps) {
    if (ps_.tp_size() > 1)
      tp_ = std::make_unique<TensorParallel>(mc_, ps_.tp(), s.sequence_parallel,
                                             s.tp_comm_overlap ? s.tp_comm_overlap_chunks : 1);
    train_w_ = allocate();
    HONE_CHECK(initial.flat.numel() == train_w_.flat.numel(), "initial weights of ", initial.flat.numel(),
               " parameters, this rank's shard has ", train_w_.flat.numel());
    std::memcpy(train_w_.flat.f32(), initial.flat.f32(), train_w_.flat.nbytes());
    gen_w_ = allocate();
    std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
    if (s.loss.kl_coef > 0) {
      ref_w_ = allocate();
      std::memcpy(ref_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
      ref_model_ = std::make_unique<Transformer>(mc_, ref_w_, tp_.get());
    }
    grads_ = allocate();
    train_model_ = std::make_unique<Transformer>(mc_, train_w_, tp_.get());
    train_model_->set_recompute(s.activation_recompute);
    GenerationOptions go;
    go.max_batch = int(std::max<int64_t>(1, std::min<int64_t>(256, s.rollouts_per_step() / ps_.dp_size())));
    generator_ = std::make_unique<CpuGenerator>(mc_, gen_w_, go, tp_.get());
  }

  std::string describe() const override {
    std::string d = "cpu, fp32";
    if (tp_)
      d += cat(", tensor parallel over ", tp_->size(), " ranks",
               tp_->sequence_parallel() ? " with sequence parallelism" : "");
    if (zero_) d += cat(", distributed optimizer (ZeRO-1) over ", ps_.dp_size(), " ranks");
    return d;
  }

  void connect(const ModelWeights&) override {
    Comm& dp = ps_.dp();
    ShardedNorm norm;
    if (tp_) {
      norm.group = &tp_->comm();
      norm.weighted_sum_squares = [tp = tp_.get()](const float* g, int64_t begin, int64_t n) {
        return tp->weighted_sum_squares(g, begin, n);
      };
    }
    if (s_.distributed_optimizer && dp.size() > 1)
      zero_ = std::make_unique<DistributedAdamW>(train_w_, s_.adamw, dp, s_.grad_reduce_in_fp32, norm);
    else
      plain_ = std::make_unique<DataParallelAdamW>(train_w_, s_.adamw, dp, s_.grad_reduce_in_fp32, norm);
    // Every fp32 parameter copy: training, generation, reference, gradients; the AdamW state (whole, or this
    // rank's shard of master weights and moments plus the reduced shard and the padded staging of ZeRO-1).
    const double param = double(train_w_.flat.nbytes());
    persistent_ = param * (3 + (ref_model_ ? 1 : 0));
    if (zero_)
      persistent_ += double(zero_->layout().shard_size()) * 4 * 4 + double(zero_->layout().padded_size()) * 4;
    else
      persistent_ += 2 * param;
  }

  std::vector<Rollout> generate(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                                const StopCriteria& stop, uint64_t seed, uint32_t step, int max_total,
                                const DecodeFunction& decode) override {
    auto r = generator_->generate(requests, sampling, stop, seed, step, max_total, decode);
    peak_kv_ = std::max(peak_kv_, generator_->stats().peak_kv_bytes);
    return r;
  }

  void set_generation_progress(GenerationProgressFn fn) override { generator_->set_progress(std::move(fn)); }

  std::span<const float> logprobs(Role role, const PackedBatch& batch, float temperature) override {
    Transformer& m = role == Role::policy ? *train_model_ : *ref_model_;
    HONE_CHECK(role == Role::policy || ref_model_, "no reference model (loss.kl_coef = 0)");
    m.forward(batch, temperature, /*need_entropy=*/false);
    logprob_bytes_ = std::max(logprob_bytes_, m.allocated_bytes());
    return {m.logprobs().f32(), size_t(batch.num_tokens())};
  }

  // The loss runs through the policy_loss op on the host arrays the forward wrote.
  std::vector<PolicyLossMetrics> train(const std::vector<MicroBatch>& mbs, const TrainLoss& loss) override {
    grads_.flat.fill_zero();
    std::vector<PolicyLossMetrics> metrics;
    const bool entropy_grad = loss.config.entropy_coef != 0;
    for (const MicroBatch& mb : mbs) {
      const size_t T = size_t(mb.batch.num_tokens());
      train_model_->forward(mb.batch, loss.temperature, /*need_entropy=*/true);
      PolicyLossBatch<float> pb;
      pb.new_logprobs = {train_model_->logprobs().f32(), T};
      pb.old_logprobs = loss.on_policy ? pb.new_logprobs : std::span<const float>(mb.old);  // on-policy: detached
      pb.gen_logprobs = mb.gen;
      if (loss.config.kl_coef > 0) pb.ref_logprobs = mb.ref;
      pb.entropy = {train_model_->entropy().f32(), T};
      pb.mask = mb.mask;
      pb.seq_offsets = mb.seq_offsets;
      pb.advantages = mb.advantages;
      dlogprob_.assign(T, 0.f);
      dentropy_.assign(entropy_grad ? T : 0, 0.f);
      metrics.push_back(policy_loss<float>(loss.config, pb, loss.denominator, dlogprob_, dentropy_));
      train_model_->backward(dlogprob_.data(), entropy_grad ? dentropy_.data() : nullptr, grads_);
      training_bytes_ = std::max(training_bytes_, train_model_->allocated_bytes());
    }
    return metrics;
  }

  // The global loss denominator already makes the sum over ranks the mean gradient. The training weights are
  // updated in place (ZeRO-1: all-gathered), so the next micro-batches train on them whatever last_of_step says.
  double optimizer_step(float lr, double max_grad_norm, bool) override {
    HONE_CHECK(zero_ || plain_, "optimizer step before connect()");
    if (tp_) tp_->sum_partial_gradients(grads_);  // parameters several ranks hold: their gradients add up
    const OptimizerStepResult r = zero_ ? zero_->step(train_w_, grads_, lr, max_grad_norm)
                                        : plain_->step(train_w_, grads_, lr, max_grad_norm);
    return r.grad_norm;
  }
  int optimizer_step_count() const override { return zero_ ? zero_->step_count() : plain_->adamw().step_count(); }

  void refit() override { std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes()); }

  EngineMemory memory() const override {
    EngineMemory m;
    m.idle = m.refit = persistent_;
    m.generation = persistent_ + double(peak_kv_);
    m.logprob = persistent_ + double(logprob_bytes_);
    m.training = persistent_ + double(training_bytes_);
    return m;
  }
  void reset_memory() override { peak_kv_ = 0, logprob_bytes_ = training_bytes_ = 0; }

  void read_state(ModelWeights& master, Tensor& m, Tensor& v) override {
    FullOptimizerState full;
    if (zero_) full = zero_->full_state();  // collective over dp: this tp rank's shard of the moments
    if (ps_.dp_rank() != 0) return;
    const float* src_m = zero_ ? full.exp_avg.data() : plain_->adamw().exp_avg().f32();
    const float* src_v = zero_ ? full.exp_avg_sq.data() : plain_->adamw().exp_avg_sq().f32();
    const bool root = ps_.tp_rank() == 0;
    if (root && master.flat.numel() != count_parameters(mc_)) master = allocate_weights(mc_);
    const int64_t n = count_parameters(mc_);
    if (root) {
      m = Tensor::empty({n});
      v = Tensor::empty({n});
    }
    if (!tp_) {
      std::memcpy(master.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
      std::memcpy(m.f32(), src_m, m.nbytes());
      std::memcpy(v.f32(), src_v, v.nbytes());
      return;
    }
    // Collective over tp (the dp-rank-0 ranks): the whole state onto tp rank 0, one parameter at a time.
    Comm& tp = tp_->comm();
    gather_shards_flat(mc_, tp_->layout(), train_w_.flat.f32(), tp, root ? master.flat.f32() : nullptr);
    gather_shards_flat(mc_, tp_->layout(), src_m, tp, root ? m.f32() : nullptr);
    gather_shards_flat(mc_, tp_->layout(), src_v, tp, root ? v.f32() : nullptr);
  }
  void write_state(const ModelWeights& whole, const float* whole_m, const float* whole_v, int step_count) override {
    HONE_CHECK(whole.flat.numel() == count_parameters(mc_), "checkpoint weights do not match the model");
    // This rank's slices of the whole state (at tp = 1, the whole state itself).
    ModelWeights master = tp_ ? allocate() : whole;
    std::vector<float> shard_m, shard_v;
    const float* m = whole_m;
    const float* v = whole_v;
    if (tp_) {
      extract_shard(tp_->layout(), whole, master);
      shard_m.resize(size_t(master.flat.numel()));
      shard_v.resize(size_t(master.flat.numel()));
      extract_shard_flat(tp_->layout(), whole_m, shard_m.data());
      extract_shard_flat(tp_->layout(), whole_v, shard_v.data());
      m = shard_m.data(), v = shard_v.data();
    }
    const int64_t n = train_w_.flat.numel();
    std::memcpy(train_w_.flat.f32(), master.flat.f32(), train_w_.flat.nbytes());
    std::memcpy(gen_w_.flat.f32(), train_w_.flat.f32(), train_w_.flat.nbytes());
    if (zero_) {
      FullOptimizerState full;
      full.step = step_count;
      full.exp_avg.assign(m, m + n);
      full.exp_avg_sq.assign(v, v + n);
      zero_->load_full_state(full, master);
      return;
    }
    AdamW& a = plain_->adamw();
    std::memcpy(a.exp_avg().f32(), m, a.exp_avg().nbytes());
    std::memcpy(a.exp_avg_sq().f32(), v, a.exp_avg_sq().nbytes());
    a.set_step_count(step_count);
  }

 private:
  ModelWeights allocate() const { return tp_ ? allocate_shard_weights(tp_->layout(), mc_) : allocate_weights(mc_); }

  GrpoSettings s_;
  ModelConfig mc_;
  const ParallelState& ps_;
  std::unique_ptr<TensorParallel> tp_;  // parallel.tp > 1
  ModelWeights train_w_, gen_w_, ref_w_, grads_;
  std::unique_ptr<Transformer> train_model_, ref_model_;
  std::unique_ptr<CpuGenerator> generator_;
  std::unique_ptr<DataParallelAdamW> plain_;
  std::unique_ptr<DistributedAdamW> zero_;
  std::vector<float> dlogprob_, dentropy_;  // the loss's gradients of the current micro-batch
  double persistent_ = 0;
  int64_t peak_kv_ = 0;
  size_t logprob_bytes_ = 0, training_bytes_ = 0;
};

}  // namespace

std::unique_ptr<PolicyEngine> make_cpu_policy_engine(const GrpoSettings& s, const ModelConfig& mc,
                                                     const ModelWeights& initial, const ParallelState& ps) {
  return std::make_unique<CpuPolicyEngine>(s, mc, initial, ps);
}

}  // namespace hone::rl
