// The countdown task: "22 from 3 5 7 2:" -> an expression such as "(3+5)*2+7-..." that uses each given number at
// most once with + - * / and parentheses and equals the target exactly. The target is built from a random
// expression over all the numbers, so every example has a solution (the stored answer).
#include <algorithm>
#include <sstream>

#include "data/data_rng.h"
#include "reward/expression_eval.h"
#include "data/synthetic_tasks.h"
#include "runtime/error.h"

namespace hone::data {

namespace {

constexpr uint64_t kTaskKey = 0x434F554E54ull;

// An expression being built and the precedence of its top operator (3: a bare number, 2: * /, 1: + -).
struct Built {
  std::string text;
  int64_t value;
  int prec;
};

std::string wrap(const Built& b, int need) { return b.prec < need ? "(" + b.text + ")" : b.text; }

class CountdownTask : public SyntheticTask {
 public:
  explicit CountdownTask(const SyntheticTaskOptions& o) : o_(o) {}
  std::string name() const override { return "countdown"; }

  Prompt make(int64_t index) const override {
    for (uint64_t attempt = 0;; ++attempt) {
      HONE_USER_CHECK(attempt < 1000, "countdown: no positive whole target found for example ", index,
                      " with data.operators = '", o_.operators, "'; add + or *");
      DataRng rng(mix_keys(o_.seed, kTaskKey, mix_keys(static_cast<uint64_t>(index), attempt)));
      std::vector<int64_t> nums;
      for (int k = 0; k < o_.num_operands; ++k) nums.push_back(random_operand(rng, o_.min_digits, o_.max_digits, true));
      std::vector<int64_t> order = nums;
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
      Built e{std::to_string(order[0]), order[0], 3};
      bool ok = true;
      for (size_t k = 1; k < order.size() && ok; ++k) ok = combine(e, order[k], rng);
      if (!ok || e.value <= 0) continue;
      reward::ExpressionValue check = reward::evaluate_expression(e.text);
      HONE_CHECK(check.ok && check.value == reward::Rational::of(e.value), "countdown reference '", e.text, "' != ", e.value);
      Prompt p;
      std::ostringstream os;
      os << e.value << " from";
      for (int64_t n : nums) os << ' ' << n;
      os << ':';
      p.text = os.str();
      p.messages.push_back({"user", p.text});
      p.answer = e.text;
      p.id = index;
      p.source = cat("countdown#", index);
      return p;
    }
  }

  // Correct when the completion's first line (the part before any '=') is an expression using a sub-multiset of the
  // given numbers, evaluated exactly, equal to the target. formatted: the line parses as an expression.
  reward::RewardResult score(const Prompt& prompt, const std::string& completion) const noexcept override {
    reward::RewardResult r;
    try {
      int64_t target = 0;
      std::vector<int64_t> given;
      if (!parse_prompt(prompt.text, target, given)) return r;
      std::string line = first_line_answer(completion);
      size_t eq = line.find('=');
      if (eq != std::string::npos) line = first_line_answer(line.substr(0, eq));
      r.extracted = line;
      reward::ExpressionValue v = reward::evaluate_expression(line);
      if (!v.ok) return r;
      r.formatted = true;
      std::vector<int64_t> used = v.numbers;
      std::sort(used.begin(), used.end());
      std::sort(given.begin(), given.end());
      bool subset = std::includes(given.begin(), given.end(), used.begin(), used.end());
      r.correct = subset && v.value == reward::Rational::of(target);
      r.reward = r.correct ? 1.0 : 0.0;
    } catch (...) {
      r = reward::RewardResult{};
    }
    return r;
  }

  // "22 from 3 5 7 2:" -> target 22, numbers {3,5,7,2}.
  static bool parse_prompt(const std::string& text, int64_t& target, std::vector<int64_t>& nums) {
    std::istringstream is(text);
    std::string word;
    if (!(is >> target) || !(is >> word) || word != "from") return false;
    std::string rest;
    std::getline(is, rest);
    if (rest.empty() || rest.back() != ':') return false;
    rest.pop_back();
    std::istringstream ns(rest);
    int64_t n;
    while (ns >> n) nums.push_back(n);
    return !nums.empty() && ns.eof();
  }

 private:
  // e := e op n (or n op e for - and / when that keeps the value a positive integer). False: nothing fits.
  bool combine(Built& e, int64_t n, DataRng& rng) const {
    const std::string ns = std::to_string(n);
    for (int tries = 0; tries < 8; ++tries) {
      char op = o_.operators[rng.below(o_.operators.size())];
      switch (op) {
        case '+':
          e = {e.text + "+" + ns, e.value + n, 1};
          return true;
        case '*':
          e = {wrap(e, 2) + "*" + ns, e.value * n, 2};
          return true;
        case '-':
          if (e.value > n) {
            e = {e.text + "-" + ns, e.value - n, 1};
            return true;
          }
          if (n > e.value) {
            e = {ns + "-" + wrap(e, 2), n - e.value, 1};
            return true;
          }
          break;
        case '/':
          if (e.value % n == 0) {
            e = {wrap(e, 2) + "/" + ns, e.value / n, 2};
            return true;
          }
          if (e.value != 0 && n % e.value == 0) {
            e = {ns + "/" + wrap(e, 3), n / e.value, 2};
            return true;
          }
          break;
      }
    }
    return false;
  }

  SyntheticTaskOptions o_;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_countdown_task(const SyntheticTaskOptions& options) {
  return std::make_unique<CountdownTask>(options);
}

}  // namespace hone::data
