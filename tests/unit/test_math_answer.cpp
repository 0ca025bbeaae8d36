// The math answer checker on realistic model outputs: extraction, normalization, comparison, adversarial inputs.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "reward/math_answer.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;
using namespace hone::reward;

namespace {

struct Case {
  const char* completion;
  const char* truth;
  bool correct;
};

// Each row: a completion as a model would write it, the dataset's ground truth, whether it is correct.
const std::vector<Case> kCases = {
    // --- chain of thought ending in \boxed{} ---
    {"First, 3 apples plus 4 apples is 7 apples.\nSo the answer is $\\boxed{7}$.", "7", true},
    {"We have $2x + 3 = 11$, so $2x = 8$ and $x = 4$.\n\nTherefore, $\\boxed{4}$.", "4", true},
    {"We have $2x + 3 = 11$, so $2x = 8$ and $x = 4$.\n\nTherefore, $\\boxed{4}$.", "5", false},
    {"The area is $\\pi r^2 = 9\\pi$.\n\\boxed{9\\pi}", "9\\pi", true},
    {"Thus the probability is $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}", true},
    {"Thus the probability is $\\boxed{\\frac{1}{2}}$.", "0.5", true},
    {"Thus the probability is $\\boxed{\\frac{1}{2}}$.", "1/2", true},
    {"Thus the probability is $\\boxed{\\dfrac{1}{2}}$.", "\\frac{1}{2}", true},
    {"Thus the probability is $\\boxed{\\tfrac{1}{2}}$.", "\\frac12", true},
    {"Thus the probability is $\\boxed{\\frac{2}{4}}$.", "\\frac{1}{2}", true},
    {"Thus the probability is $\\boxed{\\frac{1}{3}}$.", "\\frac{1}{2}", false},
    {"The answer is \\boxed{0.5}.", "\\frac{1}{2}", true},
    {"So $\\boxed{-\\frac{3}{4}}$", "-3/4", true},
    {"So $\\boxed{\\frac{-3}{4}}$", "-\\frac{3}{4}", true},
    {"So $\\boxed{\\frac{3}{4}}$", "-\\frac{3}{4}", false},
    {"Hence \\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}", true},
    {"Hence \\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt2}{2}", true},
    {"Hence \\boxed{\\dfrac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}", true},
    {"Hence \\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{2}}{2}", false},
    {"Hence \\boxed{\\sqrt{2}}", "\\sqrt{2}", true},
    {"Hence \\boxed{\\sqrt{2}}", "\\sqrt2", true},
    {"Hence \\boxed{\\sqrt{2}}", "1.41421356", false},
    {"The polynomial is \\boxed{x^2+1}.", "x^2 + 1", true},
    {"The polynomial is \\boxed{x^2+1}.", "x^2 - 1", false},
    {"The solution set is $\\boxed{\\left( -\\infty, 2 \\right]}$.", "(-\\infty,2]", true},
    {"The solution set is $\\boxed{[1, 5)}$.", "[1,5)", true},
    {"The solution set is $\\boxed{[1, 5)}$.", "[1,5]", false},
    {"The point is \\boxed{(3, -2)}.", "(3,-2)", true},
    {"The point is \\boxed{(3, -2)}.", "(3,2)", false},
    {"Total: \\boxed{1,234}", "1234", true},
    {"Total: \\boxed{1{,}234}", "1234", true},
    {"Total: \\boxed{1\\,234}", "1234", true},
    {"Total: \\boxed{1 234}", "1234", true},
    {"Total: \\boxed{1,000,000}", "1000000", true},
    {"Total: \\boxed{1000000}", "1,000,000", true},
    {"Total: \\boxed{100000}", "1,000,000", false},
    {"The price is \\boxed{\\$18.00}", "18", true},
    {"The price is \\boxed{\\$18.50}", "18.5", true},
    {"The price is \\boxed{\\$18.50}", "18", false},
    {"The angle is $\\boxed{30^\\circ}$.", "30", true},
    {"The angle is $\\boxed{30^{\\circ}}$.", "30", true},
    {"The angle is $\\boxed{30\xC2\xB0}$.", "30", true},
    {"The angle is $\\boxed{60^\\circ}$.", "30", false},
    {"The length is \\boxed{5 \\text{ cm}}.", "5", true},
    {"The length is \\boxed{5\\text{cm}}.", "5", true},
    {"The area is \\boxed{12 \\text{ square feet}}.", "12", true},
    {"The area is \\boxed{12\\mbox{ m}^2}.", "12", true},
    {"She has \\boxed{\\text{12 apples}}.", "12", true},
    {"\\boxed{\\text{Monday}}", "Monday", true},
    {"\\boxed{\\text{monday}}", "Monday", true},
    {"\\boxed{\\textbf{(C)}}", "C", true},
    {"\\boxed{(B)}", "B", true},
    {"\\boxed{B}", "C", false},
    {"\\boxed{\\mathrm{Yes}}", "yes", true},
    {"So $x = 5$, and \\boxed{x = 5}.", "5", true},
    {"\\boxed{x=-3}", "-3", true},
    {"\\boxed{y_1 = 2}", "2", true},
    {"\\boxed{x \\le 3}", "x\\leq3", true},
    {"\\boxed{50\\%}", "50", true},
    {"\\boxed{50\\%}", "0.5", true},
    {"\\boxed{50\\%}", "50\\%", true},
    {"\\boxed{0.5}", "50\\%", true},
    {"\\boxed{50}", "50\\%", true},
    {"\\boxed{25\\%}", "0.5", false},
    {"\\boxed{12.5\\%}", "\\frac{1}{8}", true},
    {"\\boxed{3.14}", "3.14", true},
    {"\\boxed{3.140}", "3.14", true},
    {"\\boxed{3.14}", "3.15", false},
    {"\\boxed{0.3333333}", "\\frac{1}{3}", true},
    {"\\boxed{0.33}", "\\frac{1}{3}", false},
    {"\\boxed{\\frac{1}{3}}", "0.333333333", true},
    {"\\boxed{2.9999999}", "3", false},
    {"\\boxed{3.0}", "3", true},
    {"\\boxed{3.}", "3", true},
    {"\\boxed{03}", "3", true},
    {"\\boxed{-0}", "0", true},
    {"\\boxed{-0.0}", "0", true},
    {"\\boxed{0}", "-0", true},
    {"\\boxed{-5}", "5", false},
    {"\\boxed{- 5}", "-5", true},
    {"\\boxed{+5}", "5", true},
    {"\\boxed{1.5 \\times 10^{3}}", "1500", true},
    {"\\boxed{1.5 \\cdot 10^3}", "1500", true},
    {"\\boxed{1.5e3}", "1500", true},
    {"\\boxed{1.5E3}", "1.5\\times10^{3}", true},
    {"\\boxed{2.5e-3}", "0.0025", true},
    {"\\boxed{2.5e-3}", "0.025", false},
    {"\\boxed{6.02 \\times 10^{23}}", "6.02e23", true},
    {"\\boxed{12345678901234567890123456789012345678901234567890}",
     "12345678901234567890123456789012345678901234567890", true},
    {"\\boxed{12345678901234567890123456789012345678901234567891}",
     "12345678901234567890123456789012345678901234567890", false},
    {"\\boxed{12,345,678,901,234,567,890,123,456,789,012,345,678,901,234,567,890}",
     "12345678901234567890123456789012345678901234567890", true},
    {"\\boxed{1e50}", "100000000000000000000000000000000000000000000000000", true},
    {"\\boxed{99999999999999999999999999999999999999999}", "99999999999999999999999999999999999999998", false},
    {"\\boxed{\\frac{4}{2}}", "2", true},
    {"\\boxed{4/2}", "2", true},
    {"\\boxed{\\frac{7}{2}}", "3.5", true},
    {"\\boxed{3\\frac{1}{2}}", "3\\frac{1}{2}", true},
    {"$\\boxed{\\left(\\frac{1}{2}, 3\\right)}$", "\\left(\\frac12,3\\right)", true},
    {"\\boxed{\\{1, 2, 3\\}}", "\\{1,2,3\\}", true},
    {"\\boxed{\\displaystyle \\frac{1}{2}}", "0.5", true},
    {"\\boxed{ 42 }", "42", true},
    {"\\boxed{42.}", "42", true},
    {"\\boxed{{42}}", "42", true},
    {"\\boxed 7", "7", true},
    {"the result is $\\boxed 7$ indeed", "7", true},
    {"\\fbox{13}", "13", true},
    {"\\fbox{13}", "14", false},
    {"\\boxed{\\$1,080}", "1080", true},
    {"\\boxed{2, 3}", "2,3", true},
    {"\\boxed{3, 2}", "2,3", false},  // lists compare as written
    {"\\boxed{3,5}", "3.5", false},   // no decimal commas
    {"\\boxed{1 + x^2}", "x^2+1", false},  // expressions compare as normalized strings, not algebraically
    {"\\boxed{5\\sqrt{2}}", "5\\sqrt2", true},
    {"\\boxed{\\infty}", "\\infty", true},
    {"\\boxed{x \\in [2, 5]}", "[2,5]", true},
    {"\\boxed{\xE2\x88\x92" "5}", "-5", true},  // U+2212 minus sign
    {"\\boxed{1.5 x 10^3}", "1500", true},
    {"\\boxed{10^{3}}", "1000", true},
    {"\\boxed{2^{10}}", "1024", false},  // only powers of ten are read as numbers
    {"\\boxed{y = 2x + 3}", "y=2x+3", true},
    {"\\boxed{50 \\text{ percent}}", "50\\%", true},
    {"\\boxed{.5}", "0.5", true},
    // --- several boxed answers: the last complete one wins ---
    {"At first I thought \\boxed{3}, but rechecking gives \\boxed{5}.", "5", true},
    {"At first I thought \\boxed{3}, but rechecking gives \\boxed{5}.", "3", false},
    {"\\boxed{1} \\boxed{2} \\boxed{3}", "3", true},
    {"\\boxed{\\boxed{8}}", "8", true},
    {"Answer \\boxed{9} then an unclosed \\boxed{10", "9", true},
    {"Answer \\boxed{9} then an unclosed \\boxed{10", "10", false},
    {"\\boxed{\\frac{1}{2}", "\\frac{1}{2}", false},
    {"Braces \\boxed{\\{x\\}} then", "\\{x\\}", true},
    {"\\boxed{}", "0", false},
    {"\\boxedx{5}", "5", true},  // not a box: the last number fallback still reads 5
    // --- GSM8K style ---
    {"Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72", "72",
     true},
    {"Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n"
     "#### 10",
     "10", true},
    {"#### 1,080", "1080", true},
    {"#### $1,080.", "1080", true},
    {"#### 1080 dollars", "1080", true},
    {"#### -12", "-12", true},
    {"#### 72", "#### 72", true},
    {"#### 71", "He sold 72 clips.\n#### 72", false},
    {"#### 72", "He sold 48+24=72 clips.\n#### 72", true},
    {"blah\n####   5  \nmore text", "5", true},
    {"#### \n", "0", false},
    {"#### 3\n#### 4", "4", true},
    // --- "the answer is" / "final answer" ---
    {"Let's compute: 6*7 = 42. The answer is 42.", "42", true},
    {"So the answer is 42. I hope it is correct.", "42", true},
    {"Final Answer: The final answer is $\\frac{3}{5}$. I hope it is correct.", "\\frac{3}{5}", true},
    {"Final Answer: The final answer is $\\frac{3}{5}$. I hope it is correct.", "0.6", true},
    {"final answer: 17", "17", true},
    {"FINAL ANSWER: 17", "17", true},
    {"The answer is: 3.5 meters.", "3.5", true},
    {"The answer is $-2$.", "-2", true},
    {"the answer is 12, and 13 is wrong", "12", false},  // the phrase's answer is "12, and 13 is wrong"
    {"Answer: 8", "8", true},
    {"I think the answer is 5. Wait, no: the answer is 6.", "6", true},
    {"I think the answer is 5. Wait, no: the answer is 6.", "5", false},
    {"The answer is \\boxed{10}, not 11.", "10", true},
    {"**Final Answer:** 42", "42", true},
    {"**Answer:** 12", "12", true},
    {"## Answer: 12", "12", true},
    {"Let me check my answer: 3*4 = 12. So we get 12", "12", true},  // mid-line "answer:" is not a phrase
    {"The final answer is **7**.", "7", true},
    // --- last-number fallback ---
    {"So she has 15 marbles left.", "15", true},
    {"So she has 15 marbles left.", "16", false},
    {"The total cost is $1,234.50.", "1234.5", true},
    {"The total cost is $1\\,234.50.", "1234.5", true},
    {"The temperature drops to -7 degrees.", "-7", true},
    {"From 3-5 we get 2", "2", true},
    {"We have 10 - 3 = 7", "7", true},
    {"x-3", "3", true},
    {"The ratio is 3/4", "0.75", true},
    {"The ratio is 3/4", "3/4", true},
    {"answer 1.5", "1.5", true},
    {"It is 0.5", "1/2", true},
    {"42", "42", true},
    {"  42  \n", "42", true},
    {"$\\dfrac{1}{2}$", "0.5", true},
    {"-3.5", "-7/2", true},
    {"no numbers here at all", "5", false},
    {"There are 3 cases; each has 4 options, so 12.", "12", true},
    // --- adversarial ---
    {"", "5", false},
    {"   \n\t  ", "5", false},
    {"\\boxed{", "5", false},
    {"}}}}{{{{\\boxed{{{{", "5", false},
    {"\xFF\xFE\x80 \\boxed{7} \xC3", "7", true},
    {"\\boxed{\xFF\xFE}", "7", false},
    {"The answer is \xE2\x88\x9E", "\xE2\x88\x9E", true},
    {"\\boxed{5}", "", false},
    {"\\boxed{abc}", "", false},
    {"\\boxed{NaN}", "nan", true},
    {"\\boxed{inf}", "5", false},
    {"\\boxed{1/0}", "5", false},
    {"\\boxed{\\frac{1}{0}}", "\\frac{1}{0}", true},
    {"#### ####", "5", false},
};

}  // namespace

BOOST_AUTO_TEST_SUITE(math_answer)

BOOST_AUTO_TEST_CASE(table_of_model_outputs) {
  BOOST_TEST(kCases.size() >= 150u);
  int wrong = 0;
  for (const Case& c : kCases) {
    reward::MathCheck m = check_math_answer(c.completion, c.truth);
    if (m.correct != c.correct) {
      ++wrong;
      BOOST_ERROR("completion [" << c.completion << "] truth [" << c.truth << "]: expected "
                                 << (c.correct ? "correct" : "wrong") << ", extracted ("
                                 << reward::answer_source_name(m.extracted.source) << ") [" << m.extracted.text << "]");
    }
  }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(extraction_source_and_text) {
  auto ex = [](const std::string& s) { return reward::extract_final_answer(s); };
  BOOST_TEST(ex("a \\boxed{1} b \\boxed{\\frac{2}{3}} c").text == "\\frac{2}{3}");
  BOOST_TEST(reward::answer_source_name(ex("#### 12").source) == std::string("hashes"));
  BOOST_TEST(ex("#### 12").text == "12");
  BOOST_TEST(reward::answer_source_name(ex("The answer is 7.").source) == std::string("phrase"));
  BOOST_TEST(ex("The answer is 7.").text == "7");
  BOOST_TEST(reward::answer_source_name(ex("got 7 and then 8 apples").source) == std::string("last_number"));
  BOOST_TEST(ex("got 7 and then 8 apples").text == "8");
  BOOST_TEST(ex("total 1,234,567 units").text == "1,234,567");
  BOOST_TEST(!reward::extract_final_answer("got 7 and then 8 apples", /*fallback_last_number=*/false).found());
  BOOST_TEST(!ex("").found());
  BOOST_TEST(!ex("\\boxed{").found());
  // \boxed beats #### and the phrase, wherever they are.
  BOOST_TEST(ex("\\boxed{1}\nThe answer is 2\n#### 3").text == "1");
  BOOST_TEST(ex("#### 3\nThe answer is 2").text == "3");
}

BOOST_AUTO_TEST_CASE(normalization_examples) {
  auto norm = [](const std::string& s) { return reward::normalize_answer(s).text; };
  BOOST_TEST(norm("$\\dfrac{1}{2}$") == "\\frac{1}{2}");
  BOOST_TEST(norm("\\frac12") == "\\frac{1}{2}");
  BOOST_TEST(norm("\\left( 1, 2 \\right)") == "(1,2)");
  BOOST_TEST(norm("1,234,567") == "1234567");
  BOOST_TEST(norm("1,23") == "1,23");  // not thousands groups: left alone
  BOOST_TEST(norm("x = 5") == "5");
  BOOST_TEST(norm("30^\\circ") == "30");
  BOOST_TEST(norm("5 \\text{ cm}") == "5");
  BOOST_TEST(norm("5 x") == "5x");  // a variable is not a unit
  BOOST_TEST(norm("\\text{Monday}.") == "monday");
  reward::NormalizedAnswer p = normalize_answer("50\\%");
  BOOST_TEST(p.is_number);
  BOOST_TEST(p.number.percent);
  BOOST_TEST(p.text == "50");
  reward::NormalizedAnswer big = normalize_answer("-1.50e3");
  BOOST_TEST(big.is_number);
  BOOST_TEST(big.number.decimal.negative);
  BOOST_TEST(big.number.decimal.digits == "15");
  BOOST_TEST(big.number.decimal.exponent == 2);
  BOOST_TEST(big.number.has_rational);
  BOOST_TEST(static_cast<long>(big.number.rational.num) == -1500);
  BOOST_TEST(!reward::normalize_answer("\\sqrt{2}").is_number);
}

BOOST_AUTO_TEST_CASE(ground_truth_may_be_a_whole_solution) {
  BOOST_TEST(reward::ground_truth_answer("48/2 = 24\n#### 72") == "72");
  BOOST_TEST(reward::ground_truth_answer("so $\\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}");
  BOOST_TEST(reward::ground_truth_answer("3/4") == "3/4");
}

BOOST_AUTO_TEST_CASE(reward_and_format_bonus) {
  reward::MathRewardOptions o;
  o.format_reward = 0.1;
  reward::MathReward boxed(o);
  reward::RewardResult r = boxed.score("so \\boxed{4}", "4");
  BOOST_TEST(r.correct);
  BOOST_TEST(r.formatted);
  BOOST_TEST(r.reward == 1.1);
  r = boxed.score("so \\boxed{5}", "4");
  BOOST_TEST(!r.correct);
  BOOST_TEST(r.reward == 0.1);  // the format was followed
  r = boxed.score("#### 4", "4");
  BOOST_TEST(r.correct);
  BOOST_TEST(!r.formatted);
  BOOST_TEST(r.reward == 1.0);
  r = boxed.score("", "4");
  BOOST_TEST(r.reward == 0.0);
  o.format = reward::parse_answer_format("hashes");
  BOOST_TEST(reward::MathReward(o).score("#### 4", "4").reward == 1.1);
  o.format = reward::parse_answer_format("any");
  BOOST_TEST(reward::MathReward(o).score("The answer is 4.", "4").reward == 1.1);
  BOOST_TEST(reward::MathReward(o).score("it is 4", "4").reward == 1.0);  // last number: correct, no format bonus
  BOOST_CHECK_THROW(reward::parse_answer_format("latex"), hone::UserError);
  o.check.fallback_last_number = false;
  BOOST_TEST(reward::MathReward(o).score("it is 4", "4").reward == 0.0);
  hone::data::Prompt prompt;
  prompt.answer = "4";
  BOOST_TEST(reward::MathReward().score(prompt, "\\boxed{4}").reward == 1.0);
}

BOOST_AUTO_TEST_CASE(relative_tolerance_is_configurable) {
  BOOST_TEST(!reward::math_answers_equal("3.1416", "3.14159", 1e-6));
  BOOST_TEST(reward::math_answers_equal("3.1416", "3.14159", 1e-4));
  BOOST_TEST(!reward::math_answers_equal("3", "3.0001", 1e-3));  // "3" is an integer as written: exact
}

BOOST_AUTO_TEST_CASE(very_long_outputs_are_fast) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "Step " + std::to_string(i) + ": we add {x} and \\left( y \\right).\n";
  std::string with_box = text + "So \\boxed{123456}.";
  std::string unclosed;
  for (int i = 0; i < 100000; ++i) unclosed += "\\boxed{";
  std::string deep = "\\boxed{" + std::string(200000, '{') + "7" + std::string(200000, '}') + "}";
  auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(reward::check_math_answer(with_box, "123456").correct);
  BOOST_TEST(!reward::check_math_answer(text, "123456").correct);
  BOOST_TEST(reward::check_math_answer(text, "19999").correct);  // the last number
  BOOST_TEST(!reward::check_math_answer(unclosed, "1").correct);
  BOOST_TEST(reward::check_math_answer(deep, "7").correct);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("long outputs scored in " << s << " s");
  BOOST_TEST(s < 5.0);  // linear scans: well under a second on one core
}

// Random bytes and mutated realistic outputs: the reward returns a value in {0, 1} + {0, bonus}, never throws.
BOOST_AUTO_TEST_CASE(fuzz_never_throws) {
  reward::MathRewardOptions o;
  o.format_reward = 0.25;
  reward::MathReward reward(o);
  uint64_t state = 12345;
  auto next = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  const std::string alphabet = "0123456789{}\\$#.,/-+%^ eE=()[]xboxedfrac\ntext";
  const std::vector<std::string> seeds = {"The answer is \\boxed{\\frac{1}{2}}.", "#### 1,234",
                                          "so x = -3.5e2 \\text{ cm}", "\\boxed{\\left(1,2\\right]}"};
  int scored = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string s;
    if (i % 2 == 0) {
      size_t n = next() % 64;
      for (size_t k = 0; k < n; ++k) s += static_cast<char>(next() % 256);
    } else {
      s = seeds[next() % seeds.size()];
      size_t edits = 1 + next() % 6;
      for (size_t k = 0; k < edits && !s.empty(); ++k) {
        size_t at = next() % s.size();
        if (next() % 2) s[at] = alphabet[next() % alphabet.size()];
        else s.insert(at, 1, alphabet[next() % alphabet.size()]);
      }
    }
    std::string truth = (i % 3 == 0) ? s.substr(0, s.size() / 2) : "\\frac{1}{2}";
    reward::RewardResult r;
    BOOST_CHECK_NO_THROW(r = reward.score(s, truth));
    bool valid = r.reward == 0.0 || r.reward == 1.0 || r.reward == 0.25 || r.reward == 1.25;
    if (!valid) BOOST_ERROR("reward " << r.reward << " for input #" << i);
    ++scored;
  }
  BOOST_TEST(scored == 4000);
}

BOOST_AUTO_TEST_SUITE_END()
