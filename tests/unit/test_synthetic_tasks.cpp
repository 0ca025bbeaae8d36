// Built-in synthetic tasks: deterministic examples, exact answers, rewards, option checks, sharded streams.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <set>

#include "reward/expression_eval.h"
#include "data/synthetic_task.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;
using namespace hone::reward;

namespace {

data::SyntheticTaskOptions opts(const std::string& task) {
  SyntheticTaskOptions o;
  o.task = task;
  o.seed = 3;
  return o;
}

double score(const data::SyntheticTask& t, const data::Prompt& p, const std::string& completion) {
  return t.score(p, completion).reward;
}

bool plain_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 32 && c < 127; });
}

std::string user_error(const data::SyntheticTaskOptions& o) {
  try {
    data::make_synthetic_task(o);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(synthetic_tasks)

BOOST_AUTO_TEST_CASE(examples_are_a_function_of_seed_and_index) {
  for (const char* name : {"arithmetic", "countdown", "sort", "reverse"}) {
    data::SyntheticTaskOptions o = opts(name);
    if (std::string(name) == "countdown") o.num_operands = 4;
    auto a = data::make_synthetic_task(o), b = make_synthetic_task(o);
    o.seed = 4;
    auto c = data::make_synthetic_task(o);
    int same_as_other_seed = 0;
    std::set<std::string> distinct;
    for (int64_t i = 0; i < 50; ++i) {
      data::Prompt x = a->make(i), y = b->make(i);
      BOOST_TEST(x.text == y.text);
      BOOST_TEST(x.answer == y.answer);
      BOOST_TEST(x.id == i);
      BOOST_TEST(plain_ascii(x.text));
      BOOST_TEST(x.text.size() <= 32u);
      BOOST_TEST(x.messages.size() == 1u);
      same_as_other_seed += c->make(i).text == x.text;
      distinct.insert(x.text);
      // The stored answer earns the full reward; a model's completion is read up to its first newline.
      BOOST_TEST(score(*a, x, x.answer) == 1.0, name << " " << x.text << " -> " << x.answer);
      BOOST_TEST(score(*a, x, " " + x.answer + "  \nanything after") == 1.0);
    }
    BOOST_TEST(same_as_other_seed < 10);
    BOOST_TEST(distinct.size() > 25u);
  }
}

BOOST_AUTO_TEST_CASE(arithmetic_prompts_and_exact_answers) {
  data::SyntheticTaskOptions o = opts("arithmetic");
  o.min_digits = 2;
  o.max_digits = 3;
  o.operators = "+*";
  o.num_operands = 3;
  auto t = data::make_synthetic_task(o);
  for (int64_t i = 0; i < 100; ++i) {
    data::Prompt p = t->make(i);
    BOOST_TEST(p.text.back() == '=');
    std::string expr = p.text.substr(0, p.text.size() - 1);
    reward::ExpressionValue v = evaluate_expression(expr);
    BOOST_TEST(v.ok);
    BOOST_TEST(v.numbers.size() == 3u);
    for (int64_t n : v.numbers) BOOST_TEST((n >= 10 && n <= 999));
    BOOST_TEST(expr.find_first_not_of("0123456789+*") == std::string::npos);
    BOOST_TEST(to_string(v.value) == p.answer);
  }
  // Usual precedence: the answer of "2+3*4" is 14.
  data::Prompt fixed;
  fixed.text = "2+3*4=";
  fixed.answer = to_string(reward::evaluate_expression("2+3*4").value);
  BOOST_TEST(fixed.answer == "14");
  BOOST_TEST(score(*t, fixed, "14") == 1.0);
  BOOST_TEST(score(*t, fixed, "20") == 0.0);
  BOOST_TEST(score(*t, fixed, "14.0") == 1.0);
  BOOST_TEST(score(*t, fixed, "014") == 1.0);
  BOOST_TEST(score(*t, fixed, "1 4") == 0.0);
  BOOST_TEST(score(*t, fixed, "\n14") == 0.0);  // the first line is empty
  BOOST_TEST(score(*t, fixed, "") == 0.0);
  BOOST_TEST(!t->score(fixed, "fourteen").formatted);
  BOOST_TEST(t->score(fixed, "13").formatted);
}

BOOST_AUTO_TEST_CASE(arithmetic_division_gives_exact_fractions) {
  data::SyntheticTaskOptions o = opts("arithmetic");
  o.operators = "/";
  o.min_digits = 1;
  o.max_digits = 1;
  auto t = data::make_synthetic_task(o);
  int fractions = 0;
  for (int64_t i = 0; i < 60; ++i) {
    data::Prompt p = t->make(i);
    BOOST_TEST(p.text.find("/0") == std::string::npos);  // never divides by zero
    fractions += p.answer.find('/') != std::string::npos;
  }
  BOOST_TEST(fractions > 10);
  data::Prompt p;
  p.text = "7/2=";
  p.answer = "7/2";
  BOOST_TEST(score(*t, p, "7/2") == 1.0);
  BOOST_TEST(score(*t, p, "14/4") == 1.0);
  BOOST_TEST(score(*t, p, "3.5") == 1.0);
  BOOST_TEST(score(*t, p, "3") == 0.0);
  BOOST_TEST(score(*t, p, "7/0") == 0.0);
}

BOOST_AUTO_TEST_CASE(countdown_checks_the_expression) {
  data::SyntheticTaskOptions o = opts("countdown");
  o.num_operands = 4;
  o.operators = "+-*/";
  auto t = data::make_synthetic_task(o);
  for (int64_t i = 0; i < 100; ++i) {
    data::Prompt p = t->make(i);
    BOOST_TEST(p.text.find(" from ") != std::string::npos);
    BOOST_TEST(p.text.back() == ':');
    BOOST_TEST(std::stoll(p.text) > 0);
  }
  data::Prompt p;
  p.text = "22 from 3 5 7 2:";
  p.answer = "(3+5)*2+7-...";
  BOOST_TEST(score(*t, p, "3*5+7") == 1.0);
  BOOST_TEST(score(*t, p, "(3 + 5) * 2 + 7 - 2") == 0.0);  // 2 used twice but given once
  BOOST_TEST(score(*t, p, "7*2+3+5") == 1.0);
  BOOST_TEST(score(*t, p, "7*2+3+5=22") == 1.0);              // "= target" after the expression is allowed
  BOOST_TEST(score(*t, p, "7*2+3+5 = 22\nbecause") == 1.0);
  BOOST_TEST(score(*t, p, "22") == 0.0);                      // 22 is not a given number
  BOOST_TEST(score(*t, p, "7*3+1") == 0.0);                   // 1 is not given
  BOOST_TEST(score(*t, p, "7*2+3") == 0.0);                   // 17
  BOOST_TEST(score(*t, p, "(7+5)/(3-3)") == 0.0);             // division by zero, 3 twice
  BOOST_TEST(score(*t, p, "5/(7-2)*22") == 0.0);
  BOOST_TEST(score(*t, p, "2*(7+5-3)+... ") == 0.0);
  BOOST_TEST(score(*t, p, "-3+25") == 0.0);                   // no unary minus
  BOOST_TEST(score(*t, p, "((((3*5+7))))") == 1.0);
  BOOST_TEST(score(*t, p, std::string(600, '(') + "3*5+7" + std::string(600, ')')) == 0.0);
  reward::RewardResult r = t->score(p, "7*2+3");
  BOOST_TEST(r.formatted);
  BOOST_TEST(!r.correct);
  BOOST_TEST(!t->score(p, "seven times two").formatted);
  // Exact rational evaluation: 22 = (7 - 3/5... ) checks fractions exactly.
  data::Prompt q;
  q.text = "24 from 1 3 4 6:";
  BOOST_TEST(score(*t, q, "6/(1-3/4)") == 1.0);
  BOOST_TEST(score(*t, q, "6/(1-3/4)+0") == 0.0);
  // A malformed prompt scores 0 instead of throwing.
  q.text = "garbage";
  BOOST_TEST(score(*t, q, "1+2") == 0.0);
}

BOOST_AUTO_TEST_CASE(sort_and_reverse) {
  data::SyntheticTaskOptions o = opts("sort");
  o.min_length = 4;
  o.max_length = 4;
  auto sort = data::make_synthetic_task(o);
  data::Prompt p = sort->make(0);
  BOOST_TEST(p.text.rfind("sort:", 0) == 0);
  BOOST_TEST(p.text.size() == 10u);
  std::string input = p.text.substr(5, 4);
  std::string sorted = input;
  std::sort(sorted.begin(), sorted.end());
  BOOST_TEST(p.answer == sorted);
  o.task = "reverse";
  o.alphabet = "digits";
  o.min_length = 2;
  o.max_length = 9;
  auto rev = data::make_synthetic_task(o);
  for (int64_t i = 0; i < 40; ++i) {
    data::Prompt r = rev->make(i);
    BOOST_TEST(r.text.rfind("rev:", 0) == 0);
    std::string in = r.text.substr(4, r.text.size() - 5);
    BOOST_TEST(in.find_first_not_of("0123456789") == std::string::npos);
    BOOST_TEST((in.size() >= 2 && in.size() <= 9));
    BOOST_TEST(std::string(in.rbegin(), in.rend()) == r.answer);
  }
  data::Prompt q;
  q.text = "rev:1234=";
  q.answer = "4321";
  BOOST_TEST(rev->score(q, "4321").reward == 1.0);
  BOOST_TEST(rev->score(q, "1234").reward == 0.0);
  BOOST_TEST(rev->score(q, "1234").formatted);
  BOOST_TEST(!rev->score(q, "43210").formatted);
  BOOST_TEST(rev->score(q, "").reward == 0.0);
}

// data.partial_credit: a wrong line earns LCS(line, answer) / max(|line|, |answer|); only the exact answer earns 1.
BOOST_AUTO_TEST_CASE(sort_and_reverse_partial_credit) {
  data::SyntheticTaskOptions o = opts("reverse");
  o.alphabet = "digits";
  auto exact = data::make_synthetic_task(o);
  o.partial_credit = true;
  auto partial = data::make_synthetic_task(o);
  data::Prompt q;
  q.text = "rev:1234=";
  q.answer = "4321";
  BOOST_TEST(exact->score(q, "4311").reward == 0.0);
  BOOST_TEST(partial->score(q, "4321").reward == 1.0);
  BOOST_TEST(partial->score(q, " 4321 \nmore").correct);
  const reward::RewardResult near = partial->score(q, "4311");
  BOOST_TEST(near.reward == 0.75);  // 431 in order
  BOOST_TEST(!near.correct);
  BOOST_TEST(near.formatted);
  BOOST_TEST(partial->score(q, "1234").reward == 0.25);   // one character in order
  BOOST_TEST(partial->score(q, "43210").reward == 0.8);   // the answer and one character more
  BOOST_TEST(partial->score(q, "43\n21").reward == 0.5);  // the first line only
  BOOST_TEST(partial->score(q, "4x3y2z1w").reward == 0.5);
  BOOST_TEST(partial->score(q, "4321" + std::string(996, 'x')).reward == 0.004);
  BOOST_TEST(partial->score(q, "9876").reward == 0.0);
  BOOST_TEST(partial->score(q, "").reward == 0.0);
  data::Prompt empty = q;
  empty.answer.clear();
  BOOST_TEST(partial->score(empty, "").reward == 0.0);
  BOOST_TEST(partial->score(empty, "12").reward == 0.0);
  // sort: the characters of the input in the wrong order earn what the longest ordered run of them is worth.
  o.task = "sort";
  o.alphabet = "letters";
  auto sort = data::make_synthetic_task(o);
  q.text = "sort:dbca=";
  q.answer = "abcd";
  BOOST_TEST(sort->score(q, "dcba").reward == 0.25);
  BOOST_TEST(sort->score(q, "bacd").reward == 0.75);
  BOOST_TEST(sort->score(q, "abcd").reward == 1.0);
}

BOOST_AUTO_TEST_CASE(options_are_validated) {
  data::SyntheticTaskOptions o = opts("juggle");
  BOOST_TEST(user_error(o).find("data.task = 'juggle' is not a task") == 0);
  o = opts("arithmetic");
  o.operators = "+^";
  BOOST_TEST(user_error(o).find("data.operators") == 0);
  o = opts("arithmetic");
  o.min_digits = 3;
  o.max_digits = 2;
  BOOST_TEST(user_error(o).find("data.max_digits") == 0);
  o = opts("arithmetic");
  o.max_digits = 10;
  o.num_operands = 4;
  BOOST_TEST(user_error(o).find("at most 36") != std::string::npos);
  o = opts("countdown");
  o.max_digits = 5;
  o.num_operands = 4;
  BOOST_TEST(user_error(o).find("at most 18 for countdown") != std::string::npos);
  o = opts("sort");
  o.alphabet = "emoji";
  BOOST_TEST(user_error(o).find("data.alphabet") == 0);
  o = opts("reverse");
  o.min_length = 0;
  BOOST_TEST(user_error(o).find("data.min_length") == 0);
  for (const char* task : {"arithmetic", "countdown", "random_tokens"}) {
    o = opts(task);
    o.vocab_size = 101;
    o.partial_credit = true;
    BOOST_TEST(user_error(o).find("data.partial_credit is for the sort and reverse tasks only") == 0, task);
  }
}

BOOST_AUTO_TEST_CASE(prompt_stream_shards_and_resumes) {
  data::SyntheticTaskOptions o = opts("arithmetic");
  std::shared_ptr<const SyntheticTask> task = data::make_synthetic_task(o);
  data::SyntheticPromptSource single(task);
  std::vector<data::SyntheticPromptSource> ranks(3, data::SyntheticPromptSource(task));
  for (int step = 0; step < 4; ++step) {
    std::vector<data::Prompt> want = single.next_batch(8), got;
    for (int r = 0; r < 3; ++r) {
      auto part = ranks[r].next_batch(8, r, 3);
      got.insert(got.end(), part.begin(), part.end());
    }
    BOOST_TEST(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      BOOST_TEST(got[i].text == want[i].text);
      BOOST_TEST(got[i].id == step * 8 + static_cast<int64_t>(i));
    }
  }
  std::string saved = single.save_cursor();
  BOOST_TEST(saved == "{\"epoch\":0,\"epoch_size\":-1,\"position\":32}");
  data::SyntheticPromptSource resumed(task);
  resumed.restore_cursor(saved);
  BOOST_TEST(resumed.next_batch(2)[1].text == single.next_batch(2)[1].text);
  BOOST_TEST(single.describe() == "synthetic task 'arithmetic'");
}

BOOST_AUTO_TEST_CASE(rewards_never_throw_on_random_bytes) {
  uint64_t state = 99;
  auto next = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(state >> 33);
  };
  for (const char* name : {"arithmetic", "countdown", "sort", "reverse", "sort+partial", "reverse+partial"}) {
    const std::string task = name;
    data::SyntheticTaskOptions o = opts(task.substr(0, task.find('+')));
    o.partial_credit = task.find('+') != std::string::npos;
    if (o.partial_credit) o.alphabet = "digits";  // lines of the digits below share characters with the answer
    auto t = data::make_synthetic_task(o);
    data::Prompt p = t->make(1);
    for (int i = 0; i < 1000; ++i) {
      std::string s;
      size_t n = next() % 48;
      for (size_t k = 0; k < n; ++k) s += (i % 2) ? static_cast<char>(next() % 256) : "0123456789+-*/() =\n"[next() % 19];
      reward::RewardResult r;
      BOOST_CHECK_NO_THROW(r = t->score(p, s));
      if (o.partial_credit)
        BOOST_TEST((r.correct ? r.reward == 1.0 : (r.reward >= 0.0 && r.reward < 1.0)), name);
      else
        BOOST_TEST((r.reward == 0.0 || r.reward == 1.0), name);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(synthetic_random_tokens)

BOOST_AUTO_TEST_CASE(prompts_are_token_ids_of_the_asked_length_in_the_vocabulary) {
  data::SyntheticTaskOptions o = opts("random_tokens");
  o.prompt_tokens = 37;
  o.vocab_size = 50;
  const auto task = data::make_synthetic_task(o);
  std::set<int32_t> seen;
  for (int64_t i = 0; i < 20; ++i) {
    const data::Prompt p = task->make(i);
    BOOST_TEST(p.token_ids.size() == 37u);
    for (int32_t t : p.token_ids) {
      BOOST_TEST((t >= 0 && t < 50));
      seen.insert(t);
    }
    BOOST_TEST((p.token_ids == task->make(i).token_ids));  // a function of (seed, index)
    BOOST_TEST(task->score(p, "anything").reward == 0.0);
  }
  BOOST_TEST(seen.size() > 40u);  // 740 draws cover nearly all 50 ids
  BOOST_TEST((task->make(0).token_ids != task->make(1).token_ids));
  o.vocab_size = 0;
  BOOST_TEST(user_error(o).find("vocabulary") != std::string::npos);
  o.vocab_size = 50;
  o.prompt_tokens = 0;
  BOOST_TEST(user_error(o).find("data.prompt_tokens") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
