// The arithmetic task: "12+7*3=" -> "33". Usual precedence (* and / before + and -), exact answers: an integer,
// or a reduced fraction "-7/2" when division does not come out even.
#include <algorithm>

#include "data/data_rng.h"
#include "reward/expression_eval.h"
#include "data/synthetic_tasks.h"
#include "runtime/error.h"

namespace hone::data {

int64_t random_operand(DataRng& rng, int min_digits, int max_digits, bool nonzero) {
  int d = static_cast<int>(rng.range(min_digits, max_digits));
  int64_t lo = 1;
  for (int i = 1; i < d; ++i) lo *= 10;
  int64_t hi = lo * 10 - 1;
  if (d == 1) lo = nonzero ? 1 : 0;
  return rng.range(lo, hi);
}

namespace {

constexpr uint64_t kTaskKey = 0x41524954ull;  // keeps tasks' streams apart for one seed

class ArithmeticTask : public SyntheticTask {
 public:
  explicit ArithmeticTask(const SyntheticTaskOptions& o) : o_(o) {}
  std::string name() const override { return "arithmetic"; }

  Prompt make(int64_t index) const override {
    // A rare overflow of the exact answer redraws with the next attempt number: still a function of (seed, index).
    for (uint64_t attempt = 0;; ++attempt) {
      DataRng rng(mix_keys(o_.seed, kTaskKey, mix_keys(static_cast<uint64_t>(index), attempt)));
      std::string expr = std::to_string(random_operand(rng, o_.min_digits, o_.max_digits, false));
      for (int k = 1; k < o_.num_operands; ++k) {
        char op = o_.operators[rng.below(o_.operators.size())];
        expr += op;
        expr += std::to_string(random_operand(rng, o_.min_digits, o_.max_digits, op == '/'));
      }
      reward::ExpressionValue v = reward::evaluate_expression(expr);
      HONE_CHECK(attempt < 1000, "arithmetic task cannot draw example ", index);
      if (!v.ok) continue;
      Prompt p;
      p.text = expr + "=";
      p.messages.push_back({"user", p.text});
      p.answer = reward::to_string(v.value);
      p.id = index;
      p.source = cat("arithmetic#", index);
      return p;
    }
  }

  // Correct when the first line of the completion is a number (integer, a/b, or a decimal) equal to the answer.
  reward::RewardResult score(const Prompt& prompt, const std::string& completion) const noexcept override {
    reward::RewardResult r;
    try {
      r.extracted = first_line_answer(completion);
      reward::Rational want, got;
      if (!parse_number(prompt.answer, want) || !parse_number(r.extracted, got)) return r;
      r.formatted = true;
      r.correct = want == got;
      r.reward = r.correct ? 1.0 : 0.0;
    } catch (...) {
      r = reward::RewardResult{};
    }
    return r;
  }

 private:
  // "-12", "7/2", "-3.5": an exact rational; false for anything else.
  static bool parse_number(const std::string& s, reward::Rational& out) {
    if (s.empty() || s.size() > 40) return false;
    size_t slash = s.find('/'), dot = s.find('.');
    reward::i128 a, b;
    if (slash != std::string::npos) {
      std::string den = s.substr(slash + 1);
      if (den.empty() || den[0] == '-' || den[0] == '+') return false;
      return reward::parse_i128(s.substr(0, slash), a) && reward::parse_i128(den, b) && reward::make_rational(a, b, out);
    }
    if (dot != std::string::npos) {
      std::string frac = s.substr(dot + 1);
      if (frac.empty() || frac.size() > 18 || frac[0] == '-' || frac[0] == '+') return false;
      std::string whole = s.substr(0, dot);
      bool neg = !whole.empty() && whole[0] == '-';
      if (whole == "-" || whole == "+" || whole.empty()) return false;
      reward::i128 scale = 1;
      for (size_t i = 0; i < frac.size(); ++i) scale *= 10;
      if (!reward::parse_i128(whole, a) || !reward::parse_i128(frac, b)) return false;
      reward::i128 mag = (neg ? -a : a) * scale + b;
      return reward::make_rational(neg ? -mag : mag, scale, out);
    }
    return reward::parse_i128(s, a) && reward::make_rational(a, 1, out);
  }

  SyntheticTaskOptions o_;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_arithmetic_task(const SyntheticTaskOptions& options) {
  return std::make_unique<ArithmeticTask>(options);
}

}  // namespace hone::data
