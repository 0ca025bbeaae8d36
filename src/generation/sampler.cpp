// The CPU token sampler (rules in sampler.h). Exponentials and sums are in double so the CPU reference decides
// boundary cases (top-p cut, inverse CDF) with more precision than the fp32 GPU path needs.
#include "generation/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/ops.h"
#include "ops/philox.h"
#include "runtime/error.h"

namespace hone {

void non_finite_logits(const std::string& where) {
  throw UserError(cat("generation: the model's logits are not finite (", where, "): the weights or activations hold NaN "
                      "or Inf, from a diverging run (lower train.learning_rate, keep train.max_grad_norm > 0) or a "
                      "broken model file (model.path)"));
}

namespace {

// The unnormalized weights exp(z - max z) of every token, with the keep mask after the filters.
struct Filtered {
  std::vector<double> weight;  // exp(z_i - z_max), over the full vocabulary
  std::vector<char> keep;      // 1 where the token survives every filter
  double kept_mass = 0;        // sum of weight over kept tokens
  double total_mass = 0;       // sum of weight over the whole vocabulary
  double zmax = 0;
};

Filtered filter(std::span<const float> logits, const SamplingParams& p) {
  const size_t v = logits.size();
  Filtered f;
  f.weight.resize(v);
  f.keep.assign(v, 1);
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  double zmax = -INFINITY;
  for (size_t i = 0; i < v; ++i) {
    if (std::isnan(logits[i])) non_finite_logits(cat("a NaN logit at token ", i));
    zmax = std::max(zmax, logits[i] * inv_t);
  }
  if (!std::isfinite(zmax)) non_finite_logits(cat("no finite logit in a row of ", v));
  for (size_t i = 0; i < v; ++i) {
    f.weight[i] = std::exp(logits[i] * inv_t - zmax);
    f.total_mass += f.weight[i];
  }
  f.zmax = zmax;

  // top-k: the k-th largest weight is the threshold (weights are monotone in z, so this is the k-th largest z).
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < v) {
    std::vector<double> w = f.weight;
    std::nth_element(w.begin(), w.begin() + (p.top_k - 1), w.end(), std::greater<double>());
    const double kth = w[p.top_k - 1];
    for (size_t i = 0; i < v; ++i)
      if (f.weight[i] < kth) f.keep[i] = 0;
  }

  // top-p: walk the kept weights from the largest down until their mass reaches p; everything >= that weight stays.
  // Only the head of the distribution is sorted: select the m largest (m = 64, 256, ...) until they hold the mass.
  if (p.top_p < 1.0f) {
    std::vector<double> w;
    double mass = 0;
    for (size_t i = 0; i < v; ++i)
      if (f.keep[i]) w.push_back(f.weight[i]), mass += f.weight[i];
    const double target = static_cast<double>(p.top_p) * mass;
    size_t m = std::min<size_t>(64, w.size());
    for (;;) {
      if (m < w.size()) std::nth_element(w.begin(), w.begin() + (m - 1), w.end(), std::greater<double>());
      double head = 0;
      for (size_t i = 0; i < m; ++i) head += w[i];
      if (head >= target || m == w.size()) break;
      m = std::min(4 * m, w.size());
    }
    std::sort(w.begin(), w.begin() + m, std::greater<double>());
    double acc = 0, threshold = w[m - 1];
    for (size_t i = 0; i < m; ++i) {
      acc += w[i];
      if (acc >= target) {
        threshold = w[i];
        break;
      }
    }
    for (size_t i = 0; i < v; ++i)
      if (f.weight[i] < threshold) f.keep[i] = 0;
  }

  // min-p: relative to the most probable token, which every filter keeps; its weight is exp(0) = 1.
  if (p.min_p > 0.0f) {
    const double threshold = static_cast<double>(p.min_p);
    for (size_t i = 0; i < v; ++i)
      if (f.weight[i] < threshold) f.keep[i] = 0;
  }

  for (size_t i = 0; i < v; ++i)
    if (f.keep[i]) f.kept_mass += f.weight[i];
  return f;
}

}  // namespace

void validate_sampling_params(const SamplingParams& p) {
  HONE_USER_CHECK(std::isfinite(p.temperature) && p.temperature > 0.0f,
                  "generation.temperature must be > 0 (use generation.greedy = true for argmax), got ", p.temperature);
  HONE_USER_CHECK(p.top_k >= 0, "generation.top_k must be >= 0 (0 turns it off), got ", p.top_k);
  HONE_USER_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "generation.top_p must be in (0, 1], got ", p.top_p);
  HONE_USER_CHECK(p.min_p >= 0.0f && p.min_p <= 1.0f, "generation.min_p must be in [0, 1], got ", p.min_p);
}

int32_t greedy_token(std::span<const float> logits) {
  HONE_CHECK(!logits.empty(), "empty logits");
  size_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) non_finite_logits(cat("a NaN logit at token ", i));
    if (logits[i] > logits[best]) best = i;
  }
  if (!std::isfinite(logits[best])) non_finite_logits(cat("the largest logit is ", logits[best]));
  return static_cast<int32_t>(best);
}

double temperature_logprob(std::span<const float> logits, float temperature, int32_t token) {
  HONE_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size(), "token ", token, " outside vocabulary of ",
             logits.size());
  const double inv_t = 1.0 / static_cast<double>(temperature);
  double zmax = -INFINITY;
  for (float x : logits) zmax = std::max(zmax, x * inv_t);
  double sum = 0;
  for (float x : logits) sum += std::exp(x * inv_t - zmax);
  return logits[token] * inv_t - zmax - std::log(sum);
}

std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params) {
  validate_sampling_params(params);
  HONE_CHECK(!logits.empty(), "empty logits");
  std::vector<double> prob(logits.size(), 0.0);
  if (params.greedy) {
    prob[greedy_token(logits)] = 1.0;
    return prob;
  }
  const Filtered f = filter(logits, params);
  for (size_t i = 0; i < logits.size(); ++i)
    if (f.keep[i]) prob[i] = f.weight[i] / f.kept_mass;
  return prob;
}

SampledToken sample_token(std::span<const float> logits, const SamplingParams& params, float u) {
  validate_sampling_params(params);
  HONE_CHECK(!logits.empty(), "empty logits");
  HONE_CHECK(u >= 0.0f && u < 1.0f, "uniform outside [0, 1): ", u);
  SampledToken out;
  if (params.greedy) {
    out.token = greedy_token(logits);
    out.logprob = static_cast<float>(temperature_logprob(logits, params.temperature, out.token));
  } else {
    const Filtered f = filter(logits, params);
    const double target = static_cast<double>(u) * f.kept_mass;
    double acc = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!f.keep[i] || f.weight[i] == 0.0) continue;  // a weight that underflowed to 0 is never drawn
      out.token = static_cast<int32_t>(i);  // the last kept token also catches rounding at u * mass ~ mass
      acc += f.weight[i];
      if (acc > target) break;
    }
    // No token drawn: the logits were not finite (the caller names the phase, non_finite_logits).
    if (out.token < 0) {
      out.logprob = std::numeric_limits<float>::quiet_NaN();
      return out;
    }
    // The same value as temperature_logprob, from the weights already computed.
    const double inv_t = 1.0 / static_cast<double>(params.temperature);
    out.logprob = static_cast<float>(logits[out.token] * inv_t - f.zmax - std::log(f.total_mass));
  }
  return out;
}

SampledToken sample_token(std::span<const float> logits, const SamplingParams& params, uint64_t seed, uint32_t step,
                          uint32_t sample, uint32_t position) {
  return sample_token(logits, params, philox_uniform(seed, step, sample, position, kStreamToken));
}

namespace cpu {

// The batched sampler op (ops/ops.h): the CPU twin of cuda::sample_tokens.
void sample_tokens(int32_t* tokens, float* logprobs, const float* logits, int64_t ld, int B, int V,
                   const SamplingParams& p, uint64_t seed, uint32_t step, const int32_t* sample_index,
                   const int32_t* position) {
  for (int b = 0; b < B; ++b) {
    const SampledToken t = sample_token(std::span<const float>(logits + int64_t(b) * ld, size_t(V)), p, seed, step,
                                        uint32_t(sample_index[b]), uint32_t(position[b]));
    tokens[b] = t.token;
    logprobs[b] = t.logprob;
  }
}

}  // namespace cpu

}  // namespace hone
