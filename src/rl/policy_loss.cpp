// The GRPO policy loss and its gradient (formulas in policy_loss.h and doc/grpo.md). All arithmetic is in double
// whatever T is, so the float path differs from the double reference only by the rounding of its inputs/outputs.
#include "rl/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/error.h"

namespace hone {

const char* kl_type_name(KlType t) {
  switch (t) {
    case KlType::k1: return "k1";
    case KlType::k2: return "k2";
    case KlType::k3: return "k3";
  }
  return "?";
}

const char* loss_aggregation_name(LossAggregation a) {
  return a == LossAggregation::token ? "token" : "sequence";
}

const char* importance_sampling_name(ImportanceSampling m) {
  switch (m) {
    case ImportanceSampling::none: return "none";
    case ImportanceSampling::tis: return "tis";
    case ImportanceSampling::icepop: return "icepop";
    case ImportanceSampling::seq_mask: return "seq_mask";
  }
  return "?";
}

KlType parse_kl_type(std::string_view s) {
  for (KlType t : {KlType::k1, KlType::k2, KlType::k3})
    if (s == kl_type_name(t)) return t;
  throw UserError(cat("loss.kl_type: unknown value '", s, "' (allowed: k1, k2, k3)"));
}

LossAggregation parse_loss_aggregation(std::string_view s) {
  for (LossAggregation a : {LossAggregation::token, LossAggregation::sequence})
    if (s == loss_aggregation_name(a)) return a;
  throw UserError(cat("loss.aggregation: unknown value '", s, "' (allowed: token, sequence)"));
}

ImportanceSampling parse_importance_sampling(std::string_view s) {
  for (ImportanceSampling m :
       {ImportanceSampling::none, ImportanceSampling::tis, ImportanceSampling::icepop, ImportanceSampling::seq_mask})
    if (s == importance_sampling_name(m)) return m;
  throw UserError(cat("loss.importance_sampling: unknown value '", s, "' (allowed: none, tis, icepop, seq_mask)"));
}

void validate_policy_loss_config(const PolicyLossConfig& c) {
  HONE_USER_CHECK(c.ratio_clip_min >= 0 && c.ratio_clip_min <= 1,
                  "loss.ratio_clip_min must be in [0, 1], got ", c.ratio_clip_min);
  HONE_USER_CHECK(c.ratio_clip_max >= 0 && std::isfinite(c.ratio_clip_max),
                  "loss.ratio_clip_max must be >= 0, got ", c.ratio_clip_max);
  HONE_USER_CHECK(c.ratio_clip_c == 0 || (c.ratio_clip_c > 1 && std::isfinite(c.ratio_clip_c)),
                  "loss.ratio_clip_c must be 0 (off) or > 1, got ", c.ratio_clip_c);
  HONE_USER_CHECK(c.kl_coef >= 0 && std::isfinite(c.kl_coef), "loss.kl_coef must be >= 0, got ", c.kl_coef);
  HONE_USER_CHECK(c.kl_input_clamp >= 0, "loss.kl_input_clamp must be >= 0 (0: off), got ", c.kl_input_clamp);
  HONE_USER_CHECK(c.kl_output_clamp >= 0, "loss.kl_output_clamp must be >= 0 (0: off), got ", c.kl_output_clamp);
  HONE_USER_CHECK(std::isfinite(c.entropy_coef), "loss.entropy_coef must be finite, got ", c.entropy_coef);
  if (c.importance_sampling != ImportanceSampling::none) {
    HONE_USER_CHECK(c.is_threshold_high > 0 && std::isfinite(c.is_threshold_high),
                    "loss.is_threshold_high must be > 0, got ", c.is_threshold_high);
    HONE_USER_CHECK(c.is_threshold_low >= 0 && c.is_threshold_low <= c.is_threshold_high,
                    "loss.is_threshold_low must be in [0, loss.is_threshold_high], got ", c.is_threshold_low);
  }
}

void PolicyLossMetrics::merge(const PolicyLossMetrics& o) {
  loss += o.loss;
  pg_loss += o.pg_loss;
  kl_loss += o.kl_loss;
  entropy_loss += o.entropy_loss;
  valid_tokens += o.valid_tokens;
  valid_seqs += o.valid_seqs;
  clipped_tokens += o.clipped_tokens;
  dual_clipped_tokens += o.dual_clipped_tokens;
  is_masked_tokens += o.is_masked_tokens;
  is_masked_seqs += o.is_masked_seqs;
  ratio_sum += o.ratio_sum;
  ratio_min = std::min(ratio_min, o.ratio_min);
  ratio_max = std::max(ratio_max, o.ratio_max);
  kl_sum += o.kl_sum;
  is_weight_sum += o.is_weight_sum;
  mult_prob_error_sum += o.mult_prob_error_sum;
}

namespace {
double per_token(double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : 0.0; }
}  // namespace

double PolicyLossMetrics::clip_fraction() const { return per_token(static_cast<double>(clipped_tokens), valid_tokens); }
double PolicyLossMetrics::ratio_mean() const { return per_token(ratio_sum, valid_tokens); }
double PolicyLossMetrics::kl_mean() const { return per_token(kl_sum, valid_tokens); }
double PolicyLossMetrics::is_weight_mean() const { return per_token(is_weight_sum, valid_tokens); }
double PolicyLossMetrics::token_mult_prob_error() const { return per_token(mult_prob_error_sum, valid_tokens); }

namespace {

void check_offsets(std::span<const int64_t> seq_offsets, size_t n_tokens) {
  HONE_CHECK(!seq_offsets.empty() && seq_offsets.front() == 0, "seq_offsets must start at 0");
  HONE_CHECK(static_cast<size_t>(seq_offsets.back()) == n_tokens, "seq_offsets end at ", seq_offsets.back(),
             " but there are ", n_tokens, " tokens");
  for (size_t s = 1; s < seq_offsets.size(); ++s)
    HONE_CHECK(seq_offsets[s] >= seq_offsets[s - 1], "seq_offsets decrease at ", s);
}

int64_t valid_in(std::span<const uint8_t> mask, int64_t begin, int64_t end) {
  int64_t n = 0;
  for (int64_t t = begin; t < end; ++t) n += mask[t] != 0;
  return n;
}

// The KL estimator at x = ref - new and its derivative with respect to new.
struct KlValue {
  double value;
  double dnew;
};

KlValue kl_estimate(const PolicyLossConfig& c, double ref, double now) {
  double x = ref - now;
  double dx_dnew = -1.0;
  if (c.kl_input_clamp > 0 && std::fabs(x) > c.kl_input_clamp) {
    x = std::copysign(c.kl_input_clamp, x);
    dx_dnew = 0.0;
  }
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
  if (c.kl_output_clamp > 0 && std::fabs(v) > c.kl_output_clamp) {
    v = std::copysign(c.kl_output_clamp, v);
    dv_dx = 0.0;
  }
  return {v, dv_dx * dx_dnew};
}

}  // namespace

int64_t loss_denominator(LossAggregation aggregation, std::span<const uint8_t> mask,
                         std::span<const int64_t> seq_offsets) {
  check_offsets(seq_offsets, mask.size());
  if (aggregation == LossAggregation::token) return valid_in(mask, 0, static_cast<int64_t>(mask.size()));
  int64_t n = 0;
  for (size_t s = 0; s + 1 < seq_offsets.size(); ++s) n += valid_in(mask, seq_offsets[s], seq_offsets[s + 1]) > 0;
  return n;
}

template <typename T>
PolicyLossMetrics policy_loss(const PolicyLossConfig& c, const PolicyLossBatch<T>& b, double global_denominator,
                              std::span<T> dnew_logprobs, std::span<T> dentropy) {
  validate_policy_loss_config(c);
  const size_t n = b.new_logprobs.size();
  HONE_CHECK(b.old_logprobs.size() == n && b.gen_logprobs.size() == n && b.mask.size() == n &&
                 dnew_logprobs.size() == n,
             "policy loss inputs disagree on the token count ", n);
  check_offsets(b.seq_offsets, n);
  HONE_CHECK(b.advantages.size() + 1 == b.seq_offsets.size(), b.advantages.size(), " advantages for ",
             b.seq_offsets.size() - 1, " sequences");
  const bool use_kl = c.kl_coef != 0;
  HONE_CHECK(!use_kl || b.ref_logprobs.size() == n, "kl_coef > 0 needs reference logprobs for every token");
  HONE_CHECK(b.ref_logprobs.empty() || b.ref_logprobs.size() == n, "reference logprobs: ", b.ref_logprobs.size(),
             " for ", n, " tokens");
  const bool use_entropy = c.entropy_coef != 0;
  HONE_CHECK(!use_entropy || (b.entropy.size() == n && dentropy.size() == n),
             "entropy_coef != 0 needs the entropy and its gradient for every token");
  HONE_CHECK(dentropy.empty() || dentropy.size() == n, "dentropy has ", dentropy.size(), " entries for ", n, " tokens");
  HONE_CHECK(global_denominator > 0, "the global loss denominator must be > 0, got ", global_denominator);

  PolicyLossMetrics m;
  std::fill(dnew_logprobs.begin(), dnew_logprobs.end(), T(0));
  std::fill(dentropy.begin(), dentropy.end(), T(0));
  const double lo = 1.0 - c.ratio_clip_min, hi = 1.0 + c.ratio_clip_max;

  for (size_t s = 0; s + 1 < b.seq_offsets.size(); ++s) {
    const int64_t begin = b.seq_offsets[s], end = b.seq_offsets[s + 1];
    const int64_t n_valid = valid_in(b.mask, begin, end);
    if (n_valid == 0) continue;
    ++m.valid_seqs;
    const double scale = c.aggregation == LossAggregation::token
                             ? 1.0 / global_denominator
                             : 1.0 / (static_cast<double>(n_valid) * global_denominator);
    const double adv = b.advantages[s];

    bool seq_masked = false;
    if (c.importance_sampling == ImportanceSampling::seq_mask) {
      double sum = 0;
      for (int64_t t = begin; t < end; ++t)
        if (b.mask[t]) sum += static_cast<double>(b.old_logprobs[t]) - static_cast<double>(b.gen_logprobs[t]);
      const double geo = std::exp(sum / static_cast<double>(n_valid));
      seq_masked = !(geo >= c.is_threshold_low && geo <= c.is_threshold_high);
      m.is_masked_seqs += seq_masked;
    }

    for (int64_t t = begin; t < end; ++t) {
      if (!b.mask[t]) continue;
      const double now = b.new_logprobs[t], old = b.old_logprobs[t], gen = b.gen_logprobs[t];
      HONE_CHECK(!std::isnan(now) && !std::isnan(old) && !std::isnan(gen), "NaN logprob at token ", t,
                 ": new ", now, " old ", old, " generation ", gen);
      ++m.valid_tokens;

      // Clipped surrogate (pessimistic branch), then the dual-clip bound for negative advantages.
      const double ratio = std::exp(now - old);
      const double unclipped = -adv * ratio;
      const double clipped = -adv * std::clamp(ratio, lo, hi);
      double pg = unclipped, dpg = -adv * ratio;
      bool is_clipped = false;
      if (clipped > unclipped) pg = clipped, dpg = 0.0, is_clipped = true;
      if (c.ratio_clip_c > 0 && adv < 0 && -c.ratio_clip_c * adv < pg) {
        pg = -c.ratio_clip_c * adv, dpg = 0.0, is_clipped = true;
        ++m.dual_clipped_tokens;
      }
      m.clipped_tokens += is_clipped;

      // Importance weight between the generation engine and the training engine's previous policy.
      double w = 1.0;
      switch (c.importance_sampling) {
        case ImportanceSampling::none: break;
        case ImportanceSampling::tis: w = std::min(std::exp(old - gen), c.is_threshold_high); break;
        case ImportanceSampling::icepop:
          w = std::exp(old - gen);
          if (!(w >= c.is_threshold_low && w <= c.is_threshold_high)) w = 0.0, ++m.is_masked_tokens;
          break;
        case ImportanceSampling::seq_mask:
          if (seq_masked) w = 0.0, ++m.is_masked_tokens;
          break;
      }

      double kl = 0, dkl = 0;
      if (!b.ref_logprobs.empty()) {
        const KlValue k = kl_estimate(c, b.ref_logprobs[t], now);
        kl = k.value, dkl = k.dnew;
      }
      const double ent = use_entropy ? static_cast<double>(b.entropy[t]) : 0.0;

      m.pg_loss += scale * w * pg;
      m.kl_loss += scale * c.kl_coef * kl;
      m.entropy_loss -= scale * c.entropy_coef * ent;
      dnew_logprobs[t] = static_cast<T>(scale * (w * dpg + c.kl_coef * dkl));
      if (!dentropy.empty()) dentropy[t] = static_cast<T>(-scale * c.entropy_coef);

      m.ratio_sum += ratio;
      m.ratio_min = std::min(m.ratio_min, ratio);
      m.ratio_max = std::max(m.ratio_max, ratio);
      m.kl_sum += kl;
      m.is_weight_sum += w;
      m.mult_prob_error_sum += std::exp(std::fabs(gen - old));
    }
  }
  m.loss = m.pg_loss + m.kl_loss + m.entropy_loss;
  return m;
}

template PolicyLossMetrics policy_loss<float>(const PolicyLossConfig&, const PolicyLossBatch<float>&, double,
                                              std::span<float>, std::span<float>);
template PolicyLossMetrics policy_loss<double>(const PolicyLossConfig&, const PolicyLossBatch<double>&, double,
                                               std::span<double>, std::span<double>);

}  // namespace hone
