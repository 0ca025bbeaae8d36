// Rewards: the interface every environment implements (math answer check, synthetic tasks). A reward function
// never throws, whatever the completion holds (bytes that are not UTF-8, unbalanced braces, megabytes of text).
#pragma once

#include <string>
#include <vector>

#include "data/prompt_source.h"

namespace hone::reward {

// A named sub-score of a reward (an external reward's "format": 1, "length_penalty": -0.2), kept per rollout and
// as the step's metric scores/<name>.
struct RewardScore {
  std::string name;  // letters, digits, '_', '.', '-' (a metric name segment)
  double value = 0;
};

struct RewardResult {
  double reward = 0;       // correctness (1 or 0) plus the format bonus when earned
  bool correct = false;    // the extracted answer matches the ground truth
  bool formatted = false;  // the answer was given in the requested format (e.g. \boxed{})
  std::string extracted;   // the answer as extracted from the completion (empty when none was found)
  std::vector<RewardScore> scores;  // named sub-scores, when the reward gives any
};

class RewardFunction {
 public:
  virtual ~RewardFunction() = default;
  virtual std::string name() const = 0;
  // Scores one completion of a prompt. Never throws.
  virtual RewardResult score(const data::Prompt& prompt, const std::string& completion) const noexcept = 0;
};

}  // namespace hone::reward
