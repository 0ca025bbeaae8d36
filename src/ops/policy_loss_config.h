// The parameters of the GRPO policy-loss op (the deck's [loss] keys, parsed and validated in rl/policy_loss.h) and
// the layout of the block of partial sums the op writes per micro-batch. Plain header: the CUDA kernel takes the
// config by value, so host and device read the same struct.
#pragma once

#include <cstdint>

namespace hone {

enum class KlType : uint8_t { k1, k2, k3 };
enum class LossAggregation : uint8_t { token, sequence };
enum class ImportanceSampling : uint8_t { none, tis, icepop, seq_mask };

struct PolicyLossConfig {
  double ratio_clip_min = 0.2;  // loss.ratio_clip_min: the ratio is clipped below at 1 - ratio_clip_min
  double ratio_clip_max = 0.2;  // loss.ratio_clip_max: and above at 1 + ratio_clip_max (> min: clip-higher)
  double ratio_clip_c = 0.0;    // loss.ratio_clip_c: dual clip for A < 0, > 1; 0: off
  double kl_coef = 0.0;         // loss.kl_coef
  KlType kl_type = KlType::k3;  // loss.kl_type
  double kl_input_clamp = 0.0;  // loss.kl_input_clamp; 0: off
  double kl_output_clamp = 0.0; // loss.kl_output_clamp; 0: off
  LossAggregation aggregation = LossAggregation::token;          // loss.aggregation
  ImportanceSampling importance_sampling = ImportanceSampling::none;  // loss.importance_sampling
  double is_threshold_low = 0.5;   // loss.is_threshold_low (icepop, seq_mask)
  double is_threshold_high = 2.0;  // loss.is_threshold_high (tis, icepop, seq_mask)
  double entropy_coef = 0.0;       // loss.entropy_coef
};

// The op's partial sums of one micro-batch: `count` doubles in this order (token and sequence counts are exact in
// double). Sums merge by adding, ratio_min / ratio_max by min / max; rl/policy_loss.h reads a block into
// PolicyLossMetrics.
struct PolicyLossStat {
  enum : int {
    pg_loss,              // this micro-batch's share of the policy-gradient term of the global loss
    kl_loss,              // ... of the kl_coef * KL term
    entropy_loss,         // ... of the -entropy_coef * H term
    valid_tokens,
    valid_seqs,           // sequences with a valid token
    clipped_tokens,       // the clipped branch or the dual-clip bound is active
    dual_clipped_tokens,  // the dual-clip bound is active
    is_masked_tokens,     // valid tokens given weight 0 by icepop or seq_mask
    is_masked_seqs,       // sequences masked by seq_mask
    ratio_sum,
    ratio_min,            // 1e300 without valid tokens
    ratio_max,            // -1e300 without valid tokens
    kl_sum,               // per-token KL after the clamps, before kl_coef
    is_weight_sum,        // importance weights as applied
    mult_prob_error_sum,  // exp(|gen - old|)
    entropy_sum,          // entropy of the valid tokens (0 when no entropy is given)
    count
  };
};

}  // namespace hone
