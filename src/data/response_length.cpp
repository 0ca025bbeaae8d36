// Response lengths drawn per sample for the random_tokens benchmarks (see response_length.h).
#include "data/response_length.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "data/data_rng.h"
#include "runtime/error.h"

namespace hone::data {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Uniform in (0, 1), never 0: the log below needs it.
double open_unit(DataRng& rng) { return (double(rng.next() >> 11) + 0.5) * 0x1.0p-53; }

}  // namespace

double capped_lognormal_mean(double mu, double sigma, double cap) {
  const double lc = std::log(cap);
  return std::exp(mu + 0.5 * sigma * sigma) * normal_cdf((lc - mu - sigma * sigma) / sigma) +
         cap * (1.0 - normal_cdf((lc - mu) / sigma));
}

void validate(const ResponseLengthOptions& o) {
  HONE_USER_CHECK(o.rule == "off" || o.rule == "lognormal" || o.rule == "fixed", "data.response_length = '", o.rule,
                  "' is not a rule; allowed: off, lognormal, fixed");
  if (o.rule == "off") return;
  HONE_USER_CHECK(o.cap >= 1, "data.response_length needs generation.max_new_tokens >= 1, got ", o.cap);
  HONE_USER_CHECK(o.mean >= 1, "data.response_length_mean must be at least 1 token, got ", o.mean);
  if (o.rule == "fixed") {
    HONE_USER_CHECK(std::llround(o.mean) <= o.cap, "data.response_length_mean = ", o.mean,
                    " is above generation.max_new_tokens = ", o.cap);
    return;
  }
  HONE_USER_CHECK(o.sigma > 0 && o.sigma <= 10, "data.response_length_sigma must be in (0, 10], got ", o.sigma);
  // A capped mean below the cap is reached by some location; at the cap only when every sample is cut.
  HONE_USER_CHECK(o.mean < double(o.cap), "data.response_length_mean = ", o.mean,
                  " must be below generation.max_new_tokens = ", o.cap, " (the cap of the drawn lengths)");
}

ResponseLengths::ResponseLengths(const ResponseLengthOptions& options) : o_(options) {
  validate(o_);
  if (o_.rule != "lognormal") return;
  // The capped mean grows monotonically with mu, from 0 to the cap: bisection finds the mu whose capped mean is
  // the mean asked for (it converges to the last bit well within the iterations).
  const double cap = double(o_.cap);
  double lo = std::log(o_.mean) - 10.0 * o_.sigma * o_.sigma - 10.0, hi = std::log(cap) + 10.0 * o_.sigma + 10.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (capped_lognormal_mean(mid, o_.sigma, cap) < o_.mean ? lo : hi) = mid;
  }
  mu_ = 0.5 * (lo + hi);
}

int64_t ResponseLengths::draw(int64_t prompt, int64_t sample) const {
  if (o_.rule == "off") return 0;
  if (o_.rule == "fixed") return std::clamp<int64_t>(std::llround(o_.mean), 1, o_.cap);
  // Box-Muller from two uniforms of the sample's own stream.
  DataRng rng(mix_keys(mix_keys(o_.seed, 0x4C454E47ull /* "LENG" */, uint64_t(prompt)), uint64_t(sample)));
  const double u1 = open_unit(rng), u2 = open_unit(rng);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  const double x = std::exp(mu_ + o_.sigma * z);
  if (!(x < double(o_.cap))) return o_.cap;  // also an overflow to infinity
  return std::clamp<int64_t>(std::llround(x), 1, o_.cap);
}

}  // namespace hone::data
