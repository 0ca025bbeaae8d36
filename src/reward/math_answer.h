// The math answer checker: extract the final answer from a solution, normalize it and the ground truth, compare.
// Numbers compare by value: integers exactly (any size), fractions exactly as rationals (1/2 == 0.5 == \frac{1}{2}),
// reals written with fraction digits within a relative tolerance; a percentage x% also matches x/100.
// Anything else (\sqrt{2}, x^2+1, intervals) compares by normalized string equality.
#pragma once

#include <string>

#include "reward/math_answer_extract.h"
#include "reward/math_answer_normalize.h"
#include "reward/reward.h"

namespace hone::reward {

struct MathCheckOptions {
  double relative_tolerance = 1e-6;  // for reals written with fraction digits or in scientific notation
  bool fallback_last_number = true;  // take the last number when no \boxed{}, ####, or "the answer is" is found
};

// The ground truth's own final answer: a dataset answer may be a whole solution ("... #### 42" or "\boxed{42}").
std::string ground_truth_answer(const std::string& truth);

// True when two answer strings (already extracted) denote the same answer.
bool math_answers_equal(const std::string& given, const std::string& truth, double relative_tolerance = 1e-6);
bool math_answers_equal(const NormalizedAnswer& given, const NormalizedAnswer& truth, double relative_tolerance);

struct MathCheck {
  ExtractedAnswer extracted;
  bool correct = false;
};

// Extracts the final answer of `completion` and compares it with `truth`. Never throws.
MathCheck check_math_answer(const std::string& completion, const std::string& truth,
                            const MathCheckOptions& options = {}) noexcept;

// Which answer format earns the format reward.
enum class AnswerFormat { boxed, hashes, any };
// "boxed" | "hashes" | "any"; UserError otherwise.
AnswerFormat parse_answer_format(const std::string& name);

struct MathRewardOptions {
  MathCheckOptions check;
  AnswerFormat format = AnswerFormat::boxed;  // the format asked for in the prompt
  double format_reward = 0;                   // added when the answer was found in that format (correct or not)
};

// reward = (correct ? 1 : 0) + (formatted ? format_reward : 0), scored against prompt.answer.
class MathReward : public RewardFunction {
 public:
  explicit MathReward(const MathRewardOptions& options = {}) : options_(options) {}
  std::string name() const override { return "math"; }
  RewardResult score(const data::Prompt& prompt, const std::string& completion) const noexcept override;
  // The same, against an answer string.
  RewardResult score(const std::string& completion, const std::string& truth) const noexcept;

 private:
  MathRewardOptions options_;
};

}  // namespace hone::reward
