// The deck's names and checks of the GRPO policy loss, its metrics and denominators, and the host entry to the
// policy-loss op (src/ops/cpu/policy_loss.cpp holds the math).
#include "rl/policy_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/ops.h"
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
  entropy_sum += o.entropy_sum;
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

}  // namespace

PolicyLossMetrics policy_loss_metrics(const double* stats) {
  using S = PolicyLossStat;
  PolicyLossMetrics m;
  m.pg_loss = stats[S::pg_loss];
  m.kl_loss = stats[S::kl_loss];
  m.entropy_loss = stats[S::entropy_loss];
  m.loss = m.pg_loss + m.kl_loss + m.entropy_loss;
  m.valid_tokens = static_cast<int64_t>(stats[S::valid_tokens]);
  m.valid_seqs = static_cast<int64_t>(stats[S::valid_seqs]);
  m.clipped_tokens = static_cast<int64_t>(stats[S::clipped_tokens]);
  m.dual_clipped_tokens = static_cast<int64_t>(stats[S::dual_clipped_tokens]);
  m.is_masked_tokens = static_cast<int64_t>(stats[S::is_masked_tokens]);
  m.is_masked_seqs = static_cast<int64_t>(stats[S::is_masked_seqs]);
  m.ratio_sum = stats[S::ratio_sum];
  m.ratio_min = stats[S::ratio_min];
  m.ratio_max = stats[S::ratio_max];
  m.kl_sum = stats[S::kl_sum];
  m.is_weight_sum = stats[S::is_weight_sum];
  m.mult_prob_error_sum = stats[S::mult_prob_error_sum];
  m.entropy_sum = stats[S::entropy_sum];
  return m;
}

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
  HONE_CHECK(c.kl_coef == 0 || b.ref_logprobs.size() == n, "kl_coef > 0 needs reference logprobs for every token");
  HONE_CHECK(b.ref_logprobs.empty() || b.ref_logprobs.size() == n, "reference logprobs: ", b.ref_logprobs.size(),
             " for ", n, " tokens");
  HONE_CHECK(c.entropy_coef == 0 || (b.entropy.size() == n && dentropy.size() == n),
             "entropy_coef != 0 needs the entropy and its gradient for every token");
  HONE_CHECK(b.entropy.empty() || b.entropy.size() == n, "entropy: ", b.entropy.size(), " for ", n, " tokens");
  HONE_CHECK(dentropy.empty() || dentropy.size() == n, "dentropy has ", dentropy.size(), " entries for ", n, " tokens");

  const int tokens = static_cast<int>(n), seqs = static_cast<int>(b.advantages.size());
  const T* ref = b.ref_logprobs.empty() ? nullptr : b.ref_logprobs.data();
  const T* ent = b.entropy.empty() ? nullptr : b.entropy.data();
  double stats[PolicyLossStat::count];
  cpu::policy_loss_forward(stats, b.new_logprobs.data(), b.old_logprobs.data(), b.gen_logprobs.data(), ref, ent,
                           b.mask.data(), b.seq_offsets.data(), b.advantages.data(), tokens, seqs, c,
                           global_denominator);
  // The op accumulates its gradients; this entry overwrites them (0 on tokens that are not trained on).
  std::fill(dnew_logprobs.begin(), dnew_logprobs.end(), T(0));
  std::fill(dentropy.begin(), dentropy.end(), T(0));
  cpu::policy_loss_backward(dnew_logprobs.data(), dentropy.empty() ? nullptr : dentropy.data(),
                            b.new_logprobs.data(), b.old_logprobs.data(), b.gen_logprobs.data(), ref, b.mask.data(),
                            b.seq_offsets.data(), b.advantages.data(), tokens, seqs, c, global_denominator);
  return policy_loss_metrics(stats);
}

template PolicyLossMetrics policy_loss<float>(const PolicyLossConfig&, const PolicyLossBatch<float>&, double,
                                              std::span<float>, std::span<float>);
template PolicyLossMetrics policy_loss<double>(const PolicyLossConfig&, const PolicyLossBatch<double>&, double,
                                               std::span<double>, std::span<double>);

}  // namespace hone
