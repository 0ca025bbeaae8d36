// Math answer comparison and the math reward (see math_answer.h).
#include "reward/math_answer.h"

#include <cmath>

#include "runtime/error.h"

namespace hone::reward {

namespace {

// Exact value comparison first, then the tolerance for reals.
bool numbers_equal(const MathNumber& a, const MathNumber& b, double tol) {
  if (a.is_decimal && b.is_decimal && a.decimal == b.decimal) return true;
  if (a.has_rational && b.has_rational) {
    if (a.rational == b.rational) return true;
  }
  // Reals are compared within the tolerance, unless one side is a whole number as written ("3" vs "2.9999999").
  if ((a.real || b.real) && !a.integer_literal && !b.integer_literal) {
    long double x = a.approx, y = b.approx;
    if (!std::isfinite(x) || !std::isfinite(y)) return false;
    long double scale = std::fmax(std::fabs(x), std::fabs(y));
    return std::fabs(x - y) <= static_cast<long double>(tol) * scale;
  }
  return false;
}

// x% as the number x/100.
MathNumber percent_value(const MathNumber& m) {
  MathNumber p = m;
  if (p.is_decimal && !p.decimal.digits.empty()) p.decimal.exponent -= 2;
  if (p.has_rational) p.has_rational = div(m.rational, Rational::of(100), p.rational);
  p.approx = m.approx / 100;
  p.integer_literal = false;
  p.real = m.real;
  return p;
}

}  // namespace

std::string ground_truth_answer(const std::string& truth) {
  ExtractedAnswer a = extract_final_answer(truth, /*fallback_last_number=*/false);
  if (a.source == AnswerSource::boxed || a.source == AnswerSource::hashes) return a.text;
  return truth;
}

bool math_answers_equal(const NormalizedAnswer& g, const NormalizedAnswer& t, double tol) {
  if (g.is_number && t.is_number) {
    if (numbers_equal(g.number, t.number, tol)) return true;
    if (g.number.percent && numbers_equal(percent_value(g.number), t.number, tol)) return true;
    if (t.number.percent && numbers_equal(g.number, percent_value(t.number), tol)) return true;
    return false;
  }
  if (g.is_number != t.is_number) return false;
  return !t.text.empty() && g.text == t.text;
}

bool math_answers_equal(const std::string& given, const std::string& truth, double tol) {
  return math_answers_equal(normalize_answer(given), normalize_answer(truth), tol);
}

MathCheck check_math_answer(const std::string& completion, const std::string& truth,
                            const MathCheckOptions& options) noexcept {
  MathCheck c;
  try {
    c.extracted = extract_final_answer(completion, options.fallback_last_number);
    if (c.extracted.found())
      c.correct = math_answers_equal(c.extracted.text, ground_truth_answer(truth), options.relative_tolerance);
  } catch (...) {  // e.g. std::bad_alloc on absurd input: a wrong answer, not a failed run
    c.correct = false;
  }
  return c;
}

AnswerFormat parse_answer_format(const std::string& name) {
  if (name == "boxed") return AnswerFormat::boxed;
  if (name == "hashes") return AnswerFormat::hashes;
  if (name == "any") return AnswerFormat::any;
  throw UserError(cat("answer format '", name, "' is not one of: boxed, hashes, any"));
}

RewardResult MathReward::score(const std::string& completion, const std::string& truth) const noexcept {
  RewardResult r;
  MathCheck c = check_math_answer(completion, truth, options_.check);
  try {
    r.extracted = c.extracted.text;
  } catch (...) {
  }
  r.correct = c.correct;
  const AnswerSource s = c.extracted.source;
  switch (options_.format) {
    case AnswerFormat::boxed: r.formatted = s == AnswerSource::boxed; break;
    case AnswerFormat::hashes: r.formatted = s == AnswerSource::hashes; break;
    case AnswerFormat::any:
      r.formatted = s == AnswerSource::boxed || s == AnswerSource::hashes || s == AnswerSource::phrase;
      break;
  }
  r.reward = (r.correct ? 1.0 : 0.0) + (r.formatted ? options_.format_reward : 0.0);
  return r;
}

RewardResult MathReward::score(const data::Prompt& prompt, const std::string& completion) const noexcept {
  return score(completion, prompt.answer);
}

}  // namespace hone::reward
