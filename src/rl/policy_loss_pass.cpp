// The policy loss of a step's training micro-batches over the backend (see policy_loss_pass.h). Instantiated for
// every backend (backend/backend.h).
#include "rl/policy_loss_pass.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace hone::rl {
namespace {

constexpr size_t kAlign = 256;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// From pageable memory: the call returns once the data is staged, so the host vector may change afterwards.
template <typename B, typename T>
void upload(const typename B::Exec& x, T* dst, const std::vector<T>& src) {
  if (!src.empty()) B::upload(x, dst, src.data(), src.size() * sizeof(T));
}

}  // namespace

template <typename B>
void PolicyLossPass<B>::reserve(const std::vector<MicroBatch>& mbs) {
  if (mbs.empty()) return;
  int tokens = 1, seqs = 1;
  for (const MicroBatch& mb : mbs) {
    tokens = std::max(tokens, mb.batch.num_tokens());
    seqs = std::max(seqs, mb.batch.num_seqs());
  }
  if (mbs.size() > blocks_) {
    host_stats_ = Stats();
    blocks_ = std::max(mbs.size(), 2 * blocks_);
    host_stats_ = Stats(int64_t(blocks_) * PolicyLossStat::count, "policy loss statistics");
  }
  if (buffers_.get() && tokens <= max_tokens_ && seqs <= max_seqs_) return;
  max_tokens_ = std::max(tokens, max_tokens_);
  max_seqs_ = std::max(seqs, max_seqs_);
  const size_t T = size_t(max_tokens_), S = size_t(max_seqs_);
  const size_t stats = aligned(PolicyLossStat::count * sizeof(double)), offsets = aligned((S + 1) * sizeof(int64_t));
  const size_t adv = aligned(S * sizeof(float)), per_token = aligned(T * sizeof(float)), mask = aligned(T);
  buffers_ = Buffers();  // before the new one: the two never need to coexist
  buffers_ = Buffers(int64_t(stats + offsets + adv + 5 * per_token + mask), "policy loss buffers");
  char* p = buffers_.get();
  auto take = [&p](size_t bytes) {
    char* q = p;
    p += bytes;
    return q;
  };
  stats_ = reinterpret_cast<double*>(take(stats));
  offsets_ = reinterpret_cast<int64_t*>(take(offsets));
  adv_ = reinterpret_cast<float*>(take(adv));
  gen_ = reinterpret_cast<float*>(take(per_token));
  old_ = reinterpret_cast<float*>(take(per_token));
  ref_ = reinterpret_cast<float*>(take(per_token));
  dlogprob_ = reinterpret_cast<float*>(take(per_token));
  dentropy_ = reinterpret_cast<float*>(take(per_token));
  mask_ = reinterpret_cast<uint8_t*>(take(mask));
}

template <typename B>
typename PolicyLossPass<B>::Gradients PolicyLossPass<B>::run(size_t i, const MicroBatch& mb, const TrainLoss& loss,
                                                             const float* new_lp, const float* entropy) {
  const int T = mb.batch.num_tokens(), S = mb.batch.num_seqs();
  HONE_CHECK(buffers_.get() && T <= max_tokens_ && S <= max_seqs_ && i < blocks_,
             "policy loss buffers not reserved for this micro-batch");
  HONE_CHECK(mb.mask.size() == size_t(T) && mb.gen.size() == size_t(T) && mb.seq_offsets.size() == size_t(S) + 1 &&
                 mb.advantages.size() == size_t(S),
             "micro-batch arrays disagree with its ", T, " tokens and ", S, " sequences");
  const PolicyLossConfig& c = loss.config;
  const bool kl = c.kl_coef > 0, entropy_grad = c.entropy_coef != 0;
  upload<B>(exec_, mask_, mb.mask);
  upload<B>(exec_, offsets_, mb.seq_offsets);
  upload<B>(exec_, adv_, mb.advantages);
  upload<B>(exec_, gen_, mb.gen);
  if (!loss.on_policy) {
    HONE_CHECK(mb.old.size() == size_t(T), "the micro-batch has no previous-policy logprobs");
    upload<B>(exec_, old_, mb.old);
  }
  if (kl) {
    HONE_CHECK(mb.ref.size() == size_t(T), "kl_coef > 0 needs reference logprobs for every token");
    upload<B>(exec_, ref_, mb.ref);
  }
  // Exactly on-policy: the old logprobs are the new ones, detached (the op takes no gradient through them).
  const float* old = loss.on_policy ? new_lp : old_;
  const float* ref = kl ? ref_ : nullptr;
  B::policy_loss_forward(exec_, stats_, new_lp, old, gen_, ref, entropy, mask_, offsets_, adv_, T, S, c,
                         loss.denominator);
  B::download(exec_, host_stats_.get() + i * PolicyLossStat::count, stats_, PolicyLossStat::count * sizeof(double));
  // The op accumulates its gradients: start from 0 (tokens that are not trained on keep it).
  B::zero(exec_, dlogprob_, size_t(T) * sizeof(float));
  if (entropy_grad) B::zero(exec_, dentropy_, size_t(T) * sizeof(float));
  B::policy_loss_backward(exec_, dlogprob_, entropy_grad ? dentropy_ : nullptr, new_lp, old, gen_, ref, mask_,
                          offsets_, adv_, T, S, c, loss.denominator);
  return {dlogprob_, entropy_grad ? dentropy_ : nullptr};
}

template <typename B>
std::vector<PolicyLossMetrics> PolicyLossPass<B>::metrics(size_t n) {
  HONE_CHECK(n <= blocks_ || n == 0, "metrics of ", n, " micro-batches, room for ", blocks_);
  B::sync(exec_);
  std::vector<PolicyLossMetrics> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(policy_loss_metrics(host_stats_.get() + i * PolicyLossStat::count));
    HONE_USER_CHECK(std::isfinite(out.back().loss), "training: the policy loss of micro-batch ", i, " is ",
                    out.back().loss, " (a NaN or infinite logprob on a trained token: the weights hold NaN or Inf, "
                    "from a diverging run (lower train.learning_rate, keep train.max_grad_norm > 0) or a broken "
                    "model file (model.path))");
  }
  return out;
}

template <typename B>
void PolicyLossPass<B>::release() {
  buffers_ = Buffers();
  stats_ = nullptr, offsets_ = nullptr, mask_ = nullptr;
  gen_ = old_ = ref_ = adv_ = dlogprob_ = dentropy_ = nullptr;
}

#define HONE_INSTANTIATE_POLICY_LOSS_PASS(B) template class PolicyLossPass<B>;
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_POLICY_LOSS_PASS)
#undef HONE_INSTANTIATE_POLICY_LOSS_PASS

}  // namespace hone::rl
