// The GRPO policy loss of one micro-batch (fp32 CPU reference; the formulas are in rl/policy_loss.h and
// doc/grpo.md). Every value is computed in double whatever the storage type, so the float path differs from the
// double one only by the rounding of its inputs and outputs. Forward and backward walk the sequences in the same
// order and share the per-token terms, so the gradient is the derivative of exactly the loss forward reports.
#include <algorithm>
#include <cmath>

#include "ops/ops.h"
#include "runtime/error.h"

namespace hone::cpu {
namespace {

void check_offsets(const int64_t* seq_offsets, int num_seqs, int T) {
  HONE_CHECK(seq_offsets[0] == 0, "seq_offsets must start at 0");
  HONE_CHECK(seq_offsets[num_seqs] == T, "seq_offsets end at ", seq_offsets[num_seqs], " but there are ", T,
             " tokens");
  for (int s = 1; s <= num_seqs; ++s) HONE_CHECK(seq_offsets[s] >= seq_offsets[s - 1], "seq_offsets decrease at ", s);
}

template <typename T>
struct Inputs {
  const T *now, *old, *gen, *ref;
  const uint8_t* mask;
  const int64_t* offsets;
  const T* adv;
  const PolicyLossConfig& c;
  double denominator;
};

// What every token of sequence s shares: its valid tokens, the aggregation's scale and the seq_mask decision.
struct Sequence {
  int64_t begin, end, n_valid;
  double scale;
  bool masked;
};

template <typename T>
Sequence sequence(const Inputs<T>& in, int s) {
  Sequence q{in.offsets[s], in.offsets[s + 1], 0, 0.0, false};
  for (int64_t t = q.begin; t < q.end; ++t) q.n_valid += in.mask[t] != 0;
  if (q.n_valid == 0) return q;
  q.scale = in.c.aggregation == LossAggregation::token ? 1.0 / in.denominator
                                                       : 1.0 / (static_cast<double>(q.n_valid) * in.denominator);
  if (in.c.importance_sampling == ImportanceSampling::seq_mask) {
    double sum = 0;
    for (int64_t t = q.begin; t < q.end; ++t)
      if (in.mask[t]) sum += static_cast<double>(in.old[t]) - static_cast<double>(in.gen[t]);
    const double geo = std::exp(sum / static_cast<double>(q.n_valid));
    q.masked = !(geo >= in.c.is_threshold_low && geo <= in.c.is_threshold_high);
  }
  return q;
}

// The terms of one valid token and their derivatives with respect to its new logprob.
struct Token {
  double ratio, pg, dpg, w, kl, dkl;
  bool clipped, dual_clipped, is_masked;
};

template <typename T>
Token token(const Inputs<T>& in, const Sequence& q, double adv, int64_t t) {
  const PolicyLossConfig& c = in.c;
  const double now = in.now[t], old = in.old[t], gen = in.gen[t];
  Token k{};
  // Clipped surrogate (pessimistic branch), then the dual-clip bound for negative advantages.
  k.ratio = std::exp(now - old);
  const double unclipped = -adv * k.ratio;
  const double clipped = -adv * std::clamp(k.ratio, 1.0 - c.ratio_clip_min, 1.0 + c.ratio_clip_max);
  k.pg = unclipped, k.dpg = -adv * k.ratio;
  if (clipped > unclipped) k.pg = clipped, k.dpg = 0.0, k.clipped = true;
  if (c.ratio_clip_c > 0 && adv < 0 && -c.ratio_clip_c * adv < k.pg)
    k.pg = -c.ratio_clip_c * adv, k.dpg = 0.0, k.clipped = true, k.dual_clipped = true;

  // Importance weight between the generation engine and the training engine's previous policy.
  k.w = 1.0;
  switch (c.importance_sampling) {
    case ImportanceSampling::none: break;
    case ImportanceSampling::tis: k.w = std::min(std::exp(old - gen), c.is_threshold_high); break;
    case ImportanceSampling::icepop:
      k.w = std::exp(old - gen);
      if (!(k.w >= c.is_threshold_low && k.w <= c.is_threshold_high)) k.w = 0.0, k.is_masked = true;
      break;
    case ImportanceSampling::seq_mask:
      if (q.masked) k.w = 0.0, k.is_masked = true;
      break;
  }

  // KL estimator at x = ref - new, with its input and output clamps (the gradient is 0 where one is active).
  if (in.ref) {
    double x = static_cast<double>(in.ref[t]) - now, dx_dnew = -1.0;
    if (c.kl_input_clamp > 0 && std::fabs(x) > c.kl_input_clamp) x = std::copysign(c.kl_input_clamp, x), dx_dnew = 0.0;
    double v = 0, dv_dx = 0;
    switch (c.kl_type) {
      case KlType::k1: v = -x, dv_dx = -1.0; break;
      case KlType::k2: v = 0.5 * x * x, dv_dx = x; break;
      case KlType::k3: {
        const double e = std::exp(x);
        v = e - 1.0 - x, dv_dx = e - 1.0;
        break;
      }
    }
    if (c.kl_output_clamp > 0 && std::fabs(v) > c.kl_output_clamp) v = std::copysign(c.kl_output_clamp, v), dv_dx = 0.0;
    k.kl = v, k.dkl = dv_dx * dx_dnew;
  }
  return k;
}

template <typename T>
void forward(double* stats, const Inputs<T>& in, const T* entropy, int T_, int num_seqs) {
  check_offsets(in.offsets, num_seqs, T_);
  const PolicyLossConfig& c = in.c;
  HONE_CHECK(in.ref || c.kl_coef == 0, "kl_coef > 0 needs reference logprobs");
  HONE_CHECK(entropy || c.entropy_coef == 0, "entropy_coef != 0 needs the entropy");
  HONE_CHECK(in.denominator > 0, "the global loss denominator must be > 0, got ", in.denominator);
  using S = PolicyLossStat;
  std::fill(stats, stats + S::count, 0.0);
  stats[S::ratio_min] = 1e300, stats[S::ratio_max] = -1e300;
  for (int s = 0; s < num_seqs; ++s) {
    const Sequence q = sequence(in, s);
    if (q.n_valid == 0) continue;
    stats[S::valid_seqs] += 1;
    stats[S::is_masked_seqs] += q.masked;
    const double adv = in.adv[s];
    for (int64_t t = q.begin; t < q.end; ++t) {
      if (!in.mask[t]) continue;
      HONE_CHECK(!std::isnan(in.now[t]) && !std::isnan(in.old[t]) && !std::isnan(in.gen[t]), "NaN logprob at token ",
                 t, ": new ", in.now[t], " old ", in.old[t], " generation ", in.gen[t]);
      const Token k = token(in, q, adv, t);
      const double ent = entropy && c.entropy_coef != 0 ? static_cast<double>(entropy[t]) : 0.0;
      stats[S::valid_tokens] += 1;
      stats[S::clipped_tokens] += k.clipped;
      stats[S::dual_clipped_tokens] += k.dual_clipped;
      stats[S::is_masked_tokens] += k.is_masked;
      stats[S::pg_loss] += q.scale * k.w * k.pg;
      stats[S::kl_loss] += q.scale * c.kl_coef * k.kl;
      stats[S::entropy_loss] -= q.scale * c.entropy_coef * ent;
      stats[S::ratio_sum] += k.ratio;
      stats[S::ratio_min] = std::min(stats[S::ratio_min], k.ratio);
      stats[S::ratio_max] = std::max(stats[S::ratio_max], k.ratio);
      stats[S::kl_sum] += k.kl;
      stats[S::is_weight_sum] += k.w;
      stats[S::mult_prob_error_sum] += std::exp(std::fabs(static_cast<double>(in.gen[t]) - in.old[t]));
      if (entropy) stats[S::entropy_sum] += static_cast<double>(entropy[t]);
    }
  }
}

template <typename T>
void backward(T* dnew, T* dentropy, const Inputs<T>& in, int T_, int num_seqs) {
  check_offsets(in.offsets, num_seqs, T_);
  const PolicyLossConfig& c = in.c;
  for (int s = 0; s < num_seqs; ++s) {
    const Sequence q = sequence(in, s);
    if (q.n_valid == 0) continue;
    const double adv = in.adv[s];
    for (int64_t t = q.begin; t < q.end; ++t) {
      if (!in.mask[t]) continue;
      const Token k = token(in, q, adv, t);
      dnew[t] += static_cast<T>(q.scale * (k.w * k.dpg + c.kl_coef * k.dkl));
      if (dentropy) dentropy[t] += static_cast<T>(-q.scale * c.entropy_coef);
    }
  }
}

}  // namespace

void policy_loss_forward(double* stats, const float* new_lp, const float* old_lp, const float* gen_lp,
                         const float* ref_lp, const float* entropy, const uint8_t* mask, const int64_t* seq_offsets,
                         const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                         double denominator) {
  const Inputs<float> in{new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, config, denominator};
  forward(stats, in, entropy, T, num_seqs);
}

void policy_loss_forward(double* stats, const double* new_lp, const double* old_lp, const double* gen_lp,
                         const double* ref_lp, const double* entropy, const uint8_t* mask,
                         const int64_t* seq_offsets, const double* advantages, int T, int num_seqs,
                         const PolicyLossConfig& config, double denominator) {
  const Inputs<double> in{new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, config, denominator};
  forward(stats, in, entropy, T, num_seqs);
}

void policy_loss_backward(float* dnew_lp, float* dentropy, const float* new_lp, const float* old_lp,
                          const float* gen_lp, const float* ref_lp, const uint8_t* mask, const int64_t* seq_offsets,
                          const float* advantages, int T, int num_seqs, const PolicyLossConfig& config,
                          double denominator) {
  const Inputs<float> in{new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, config, denominator};
  backward(dnew_lp, dentropy, in, T, num_seqs);
}

void policy_loss_backward(double* dnew_lp, double* dentropy, const double* new_lp, const double* old_lp,
                          const double* gen_lp, const double* ref_lp, const uint8_t* mask,
                          const int64_t* seq_offsets, const double* advantages, int T, int num_seqs,
                          const PolicyLossConfig& config, double denominator) {
  const Inputs<double> in{new_lp, old_lp, gen_lp, ref_lp, mask, seq_offsets, advantages, config, denominator};
  backward(dnew_lp, dentropy, in, T, num_seqs);
}

}  // namespace hone::cpu
