// The GRPO policy loss per token, aggregated with global denominators, with its gradient with respect to the new
// log-probabilities (and the entropies) that the model backward consumes. Formulas: doc/grpo.md, "Policy loss".
// The math is the op policy_loss_forward / _backward (ops/ops.h: the CPU reference; cuda/policy_loss.cu: its
// twin); this file holds the deck's names and checks, the metrics, the denominators and a host entry to the op
// (the unit tests'). The engines run the op over their backend with rl/policy_loss_pass.h.
//
// Per valid token t of sequence s (advantage A_s):
//   r_t    = exp(new_t - old_t)
//   pg_t   = max(-A r_t, -A clip(r_t, 1 - ratio_clip_min, 1 + ratio_clip_max)),  and for A < 0 with dual clip c > 1:
//            pg_t = min(pg_t, -c A)
//   w_t    = the importance weight between the generation and the old (training-engine) policy: exp(old_t - gen_t)
//            none: 1 · tis: min(w, is_threshold_high) · icepop: w inside [low, high], else 0 (token masked)
//            seq_mask: 1, or 0 for every token of a sequence whose exp(mean_t(old_t - gen_t)) is outside [low, high]
//   kl_t   = k1: -x, k2: x^2/2, k3: exp(x) - 1 - x, with x = clamp(ref_t - new_t, +-kl_input_clamp), then the value
//            clamped to +-kl_output_clamp (0 turns a clamp off)
//   loss_t = w_t pg_t + kl_coef kl_t - entropy_coef H_t
// Aggregation: token: sum_t loss_t / D (D = valid tokens in the global batch);
//              sequence: sum_s (sum_{t in s} loss_t / n_s) / D (n_s = valid tokens of s, D = sequences with n_s > 0).
// Each micro-batch gets the GLOBAL D, so the losses and gradients of the micro-batches add up to the global ones.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ops/policy_loss_config.h"

namespace hone {

// Deck names ("k1", "token", "icepop", ...) and back; parsing throws hone::UserError listing the allowed values.
const char* kl_type_name(KlType t);
const char* loss_aggregation_name(LossAggregation a);
const char* importance_sampling_name(ImportanceSampling m);
KlType parse_kl_type(std::string_view s);
LossAggregation parse_loss_aggregation(std::string_view s);
ImportanceSampling parse_importance_sampling(std::string_view s);

// Throws hone::UserError naming the offending loss.* key.
void validate_policy_loss_config(const PolicyLossConfig& c);

// One micro-batch: tokens of whole sequences laid end to end. Token t of sequence s is in
// [seq_offsets[s], seq_offsets[s + 1]); mask[t] = 1 for tokens that are trained on (completion tokens).
template <typename T>
struct PolicyLossBatch {
  std::span<const T> new_logprobs;  // current policy (the variable of the gradient)
  std::span<const T> old_logprobs;  // previous policy, computed by the training engine before the update
  std::span<const T> gen_logprobs;  // recorded by the generator
  std::span<const T> ref_logprobs;  // reference policy; may be empty when kl_coef == 0
  std::span<const T> entropy;       // per-token entropy of the current policy; may be empty when entropy_coef == 0
  std::span<const uint8_t> mask;
  std::span<const int64_t> seq_offsets;  // n_seqs + 1 entries, from 0 to n_tokens
  std::span<const T> advantages;         // one per sequence
};

// Partial sums over one micro-batch (the op's PolicyLossStat block, read by policy_loss_metrics); merge() adds
// micro-batches (and ranks) together, then read the means.
struct PolicyLossMetrics {
  double loss = 0;          // this micro-batch's share of the global loss
  double pg_loss = 0;       // ... of which the policy-gradient term
  double kl_loss = 0;       // ... the kl_coef * KL term
  double entropy_loss = 0;  // ... the -entropy_coef * H term
  int64_t valid_tokens = 0;
  int64_t valid_seqs = 0;
  int64_t clipped_tokens = 0;       // the clipped (constant) branch of the surrogate is active, dual clip included
  int64_t dual_clipped_tokens = 0;  // the dual-clip bound -c A is active
  int64_t is_masked_tokens = 0;     // valid tokens given weight 0 by icepop or seq_mask
  int64_t is_masked_seqs = 0;       // sequences masked by seq_mask
  double ratio_sum = 0;
  double ratio_min = 1e300;
  double ratio_max = -1e300;
  double kl_sum = 0;               // per-token KL values (after clamps, before kl_coef); 0 without reference
  double is_weight_sum = 0;        // importance weights w_t as applied
  double mult_prob_error_sum = 0;  // exp(|gen_t - old_t|)
  double entropy_sum = 0;          // H_t of the valid tokens (whether or not entropy_coef is 0); 0 without entropy

  void merge(const PolicyLossMetrics& o);
  double clip_fraction() const;
  double ratio_mean() const;
  double kl_mean() const;
  double is_weight_mean() const;
  // NeMo-RL's token_mult_prob_error: the mean over valid tokens of exp(|gen - old|); 1.0 when the generation
  // engine and the training engine agree exactly.
  double token_mult_prob_error() const;
};

// The metrics of one micro-batch from the op's block of PolicyLossStat::count partial sums.
PolicyLossMetrics policy_loss_metrics(const double* stats);

// The denominator this micro-batch contributes to D (valid tokens, or sequences with a valid token); sum it over
// all micro-batches and ranks of the global batch before calling policy_loss.
int64_t loss_denominator(LossAggregation aggregation, std::span<const uint8_t> mask,
                         std::span<const int64_t> seq_offsets);

// Computes this micro-batch's loss contribution with the global denominator D, writes dloss/dnew_logprob for every
// token (0 where mask is 0) into dnew_logprobs, and dloss/dentropy into dentropy (may be empty when
// entropy_coef == 0). The host entry to the op (cpu::policy_loss_forward / _backward in ops/ops.h) with the
// config validated and the sizes checked. Instantiated for float and double.
template <typename T>
PolicyLossMetrics policy_loss(const PolicyLossConfig& config, const PolicyLossBatch<T>& batch,
                              double global_denominator, std::span<T> dnew_logprobs, std::span<T> dentropy);

}  // namespace hone
