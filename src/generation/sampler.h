// The CPU token sampler: temperature, top-k, top-p, min-p or greedy over one row of logits, drawn with a Philox
// uniform. The CUDA sampler reproduces the same rules (doc/grpo.md, "Sampling").
//
// Rules, in this order (as vLLM applies them):
//   1. temperature T > 0: z = logits / T
//   2. top-k (k > 0): keep tokens whose z is >= the k-th largest z (ties at the boundary are all kept)
//   3. top-p (p < 1): among kept tokens, with probabilities renormalized over them, keep the smallest set of the
//      most probable tokens whose mass is >= p; every token tied with the last one taken is kept too
//   4. min-p (m > 0): drop kept tokens whose probability is < m * (the largest probability)
//   5. draw: inverse CDF over the kept tokens in ascending token id order with one uniform u in [0, 1): the first
//      kept token whose running mass exceeds u * (kept mass). No sort of the vocabulary is needed for the draw.
//   greedy: the argmax of the logits (lowest id on ties); filters and the uniform are ignored.
// The recorded logprob is log_softmax(logits / T)[token] over the FULL vocabulary, before any filter: this is what
// training computes (log_softmax(logits / T) with the same T), so generation and training logprobs compare directly.
#pragma once

#include <string>

#include <cstdint>
#include <span>
#include <vector>

#include "ops/sampling_params.h"

namespace hone {

// The end of a run whose model produces NaN or infinite logits (a diverging run after a too large update, or a
// broken model file): one line naming the phase and the keys that usually cause it, never an internal check.
[[noreturn]] void non_finite_logits(const std::string& where);

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // log_softmax(logits / temperature)[token] over the full vocabulary
};

// Throws hone::UserError naming the bad parameter.
void validate_sampling_params(const SamplingParams& params);

// Samples one token from `logits` with the uniform `u` in [0, 1).
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params, float u);

// Samples with the uniform philox_uniform(seed, step, sample, position, kStreamToken): the same arguments give the
// same token however calls are ordered or batched.
SampledToken sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed, uint32_t step,
                          uint32_t sample, uint32_t position);

// The distribution the draw comes from: probability of every token after all filters (0 for dropped tokens),
// summing to 1. For greedy, 1 at the argmax. Used by tests and by the GPU sampler's comparison.
std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params);

// log_softmax(logits / temperature)[token] over the full vocabulary, in double.
double temperature_logprob(std::span<const float> logits, float temperature, int32_t token);

// The argmax, lowest id on ties.
int32_t greedy_token(std::span<const float> logits);

}  // namespace hone
