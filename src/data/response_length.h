// Benchmark-only response lengths of the random_tokens task (data.response_length): every sample stops at a length
// drawn for it alone, so a benchmark deck reproduces the long tail of a real run's response lengths with random
// weights, which never stop on their own. The draw is a pure function of (run.seed, prompt index, sample index):
// every engine, rank count and rerun sees the same length for the same sample.
//
//   lognormal: L = min(cap, max(1, round(X))), X log-normal with log-standard deviation sigma, its location chosen so
//              that the mean of L (before rounding) is `mean` exactly, the cap included. The default sigma (0.8)
//              resembles NeMo-RL's Llama-3.1-8B GRPO run (mean response 795 tokens, longest 4096, the cap): at mean
//              800 and cap 4096, 0.8 % of the samples reach the cap, so a step of 1024 samples has about 8 of them
//              and its longest sample is at the cap in all but 4 steps of 10,000; the median is 589 tokens.
//   fixed:     L = round(mean) for every sample (the companion with the same expected total).
//
// Not a way to train: the lengths ignore what the model generates (doc/data-and-rewards.md).
#pragma once

#include <cstdint>
#include <string>

namespace hone::data {

// Deck keys in brackets.
struct ResponseLengthOptions {
  std::string rule = "off";  // [data.response_length] off | lognormal | fixed
  double mean = 800;         // [data.response_length_mean] tokens
  double sigma = 0.8;        // [data.response_length_sigma] of log(length); lognormal
  int64_t cap = 0;           // generation.max_new_tokens
  uint64_t seed = 0;         // run.seed
};

// UserError naming the data.* key when an option is out of range (a mean above the cap, a sigma <= 0, ...).
void validate(const ResponseLengthOptions& options);

// The lengths of one run's samples.
class ResponseLengths {
 public:
  ResponseLengths() = default;  // off
  explicit ResponseLengths(const ResponseLengthOptions& options);  // validates
  bool on() const { return o_.rule != "off"; }
  // The completion length of sample `sample` (0 .. G-1) of the prompt with stream index `prompt`, in [1, cap];
  // 0 when the rule is off (the generation's own stop rules decide).
  int64_t draw(int64_t prompt, int64_t sample) const;
  // The log-normal's location mu (log of the median), solved for the capped mean.
  double mu() const { return mu_; }

 private:
  ResponseLengthOptions o_;
  double mu_ = 0;
};

// E[min(X, cap)] for X = exp(mu + sigma Z), Z standard normal (closed form).
double capped_lognormal_mean(double mu, double sigma, double cap);

}  // namespace hone::data
