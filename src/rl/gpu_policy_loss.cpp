// The GPU engine's policy loss per training micro-batch (see gpu_policy_loss.h).
#include "rl/gpu_policy_loss.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>

#include "cuda/check.h"
#include "runtime/error.h"

namespace hone::rl {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

template <typename T>
void upload(T* dst, const std::vector<T>& src, const cuda::GpuContext& ctx) {
  // From pageable memory: the call returns once the data is staged, so the host vector may change afterwards.
  if (!src.empty())
    CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, ctx.stream));
}

}  // namespace

GpuPolicyLoss::~GpuPolicyLoss() {
  if (h_stats_) cudaFreeHost(h_stats_);
}

void GpuPolicyLoss::reserve(const std::vector<MicroBatch>& mbs) {
  if (mbs.empty()) return;
  int tokens = 1, seqs = 1;
  for (const MicroBatch& mb : mbs) {
    tokens = std::max(tokens, mb.batch.num_tokens());
    seqs = std::max(seqs, mb.batch.num_seqs());
  }
  if (mbs.size() > blocks_) {
    if (h_stats_) CUDA_CHECK(cudaFreeHost(h_stats_));
    h_stats_ = nullptr;
    blocks_ = std::max(mbs.size(), 2 * blocks_);
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&h_stats_), blocks_ * PolicyLossStat::count * sizeof(double)));
  }
  if (device_.get() && tokens <= max_tokens_ && seqs <= max_seqs_) return;
  max_tokens_ = std::max(tokens, max_tokens_);
  max_seqs_ = std::max(seqs, max_seqs_);
  const size_t T = size_t(max_tokens_), S = size_t(max_seqs_);
  const size_t stats = aligned(PolicyLossStat::count * sizeof(double)), offsets = aligned((S + 1) * sizeof(int64_t));
  const size_t adv = aligned(S * sizeof(float)), per_token = aligned(T * sizeof(float)), mask = aligned(T);
  device_ = DeviceArray<char>();  // before the new one: the two never need to coexist
  device_ = DeviceArray<char>(int64_t(stats + offsets + adv + 5 * per_token + mask), "policy loss buffers");
  char* p = device_.get();
  auto take = [&p](size_t bytes) {
    char* q = p;
    p += bytes;
    return q;
  };
  d_stats_ = reinterpret_cast<double*>(take(stats));
  d_offsets_ = reinterpret_cast<int64_t*>(take(offsets));
  d_adv_ = reinterpret_cast<float*>(take(adv));
  d_gen_ = reinterpret_cast<float*>(take(per_token));
  d_old_ = reinterpret_cast<float*>(take(per_token));
  d_ref_ = reinterpret_cast<float*>(take(per_token));
  d_dlogprob_ = reinterpret_cast<float*>(take(per_token));
  d_dentropy_ = reinterpret_cast<float*>(take(per_token));
  d_mask_ = reinterpret_cast<uint8_t*>(take(mask));
}

GpuPolicyLoss::Gradients GpuPolicyLoss::run(size_t i, const MicroBatch& mb, const TrainLoss& loss,
                                            const float* new_lp, const float* entropy) {
  const int T = mb.batch.num_tokens(), S = mb.batch.num_seqs();
  HONE_CHECK(device_.get() && T <= max_tokens_ && S <= max_seqs_ && i < blocks_,
             "policy loss buffers not reserved for this micro-batch");
  HONE_CHECK(mb.mask.size() == size_t(T) && mb.gen.size() == size_t(T) && mb.seq_offsets.size() == size_t(S) + 1 &&
                 mb.advantages.size() == size_t(S),
             "micro-batch arrays disagree with its ", T, " tokens and ", S, " sequences");
  const PolicyLossConfig& c = loss.config;
  const bool kl = c.kl_coef > 0, entropy_grad = c.entropy_coef != 0;
  upload(d_mask_, mb.mask, ctx_);
  upload(d_offsets_, mb.seq_offsets, ctx_);
  upload(d_adv_, mb.advantages, ctx_);
  upload(d_gen_, mb.gen, ctx_);
  if (!loss.on_policy) {
    HONE_CHECK(mb.old.size() == size_t(T), "the micro-batch has no previous-policy logprobs");
    upload(d_old_, mb.old, ctx_);
  }
  if (kl) {
    HONE_CHECK(mb.ref.size() == size_t(T), "kl_coef > 0 needs reference logprobs for every token");
    upload(d_ref_, mb.ref, ctx_);
  }
  // Exactly on-policy: the old logprobs are the new ones, detached (the op takes no gradient through them).
  const float* old = loss.on_policy ? new_lp : d_old_;
  const float* ref = kl ? d_ref_ : nullptr;
  cuda::policy_loss_forward(d_stats_, new_lp, old, d_gen_, ref, entropy, d_mask_, d_offsets_, d_adv_, T, S, c,
                            loss.denominator, ctx_);
  CUDA_CHECK(cudaMemcpyAsync(h_stats_ + i * PolicyLossStat::count, d_stats_, PolicyLossStat::count * sizeof(double),
                             cudaMemcpyDeviceToHost, ctx_.stream));
  // The op accumulates its gradients: start from 0 (tokens that are not trained on keep it).
  CUDA_CHECK(cudaMemsetAsync(d_dlogprob_, 0, size_t(T) * sizeof(float), ctx_.stream));
  if (entropy_grad) CUDA_CHECK(cudaMemsetAsync(d_dentropy_, 0, size_t(T) * sizeof(float), ctx_.stream));
  cuda::policy_loss_backward(d_dlogprob_, entropy_grad ? d_dentropy_ : nullptr, new_lp, old, d_gen_, ref, d_mask_,
                             d_offsets_, d_adv_, T, S, c, loss.denominator, ctx_);
  return {d_dlogprob_, entropy_grad ? d_dentropy_ : nullptr};
}

std::vector<PolicyLossMetrics> GpuPolicyLoss::metrics(size_t n) {
  HONE_CHECK(n <= blocks_ || n == 0, "metrics of ", n, " micro-batches, room for ", blocks_);
  CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  std::vector<PolicyLossMetrics> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(policy_loss_metrics(h_stats_ + i * PolicyLossStat::count));
    HONE_USER_CHECK(std::isfinite(out.back().loss), "training: the policy loss of micro-batch ", i, " is ",
                    out.back().loss, " (a NaN or infinite logprob on a trained token: the weights hold NaN or Inf, "
                    "from a diverging run (lower train.learning_rate, keep train.max_grad_norm > 0) or a broken "
                    "model file (model.path))");
  }
  return out;
}

void GpuPolicyLoss::release() {
  device_ = DeviceArray<char>();
  d_stats_ = nullptr, d_offsets_ = nullptr, d_mask_ = nullptr;
  d_gen_ = d_old_ = d_ref_ = d_adv_ = d_dlogprob_ = d_dentropy_ = nullptr;
}

}  // namespace hone::rl

#endif  // HONE_CUDA
