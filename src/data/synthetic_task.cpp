// Synthetic task options, factory and prompt stream (see synthetic_task.h); the tasks are in synthetic_*.cpp.
#include "data/synthetic_task.h"

#include "data/synthetic_tasks.h"
#include "runtime/error.h"

namespace hone::data {

void validate(const SyntheticTaskOptions& o) {
  const std::string& t = o.task;
  HONE_USER_CHECK(t == "arithmetic" || t == "countdown" || t == "sort" || t == "reverse" || t == "random_tokens",
                  "data.task = '", t, "' is not a task; allowed: arithmetic, countdown, sort, reverse, random_tokens");
  HONE_USER_CHECK(!o.partial_credit || t == "sort" || t == "reverse", "data.partial_credit is for the sort and reverse "
                  "tasks only, not data.task = '", t, "'");
  if (t == "random_tokens") {
    HONE_USER_CHECK(o.prompt_tokens >= 1, "data.prompt_tokens must be at least 1, got ", o.prompt_tokens);
    HONE_USER_CHECK(o.vocab_size >= 1, "random_tokens needs the model's vocabulary size, got ", o.vocab_size);
  } else if (t == "arithmetic" || t == "countdown") {
    HONE_USER_CHECK(o.min_digits >= 1 && o.min_digits <= 18, "data.min_digits must be in 1..18, got ", o.min_digits);
    HONE_USER_CHECK(o.max_digits >= o.min_digits && o.max_digits <= 18, "data.max_digits must be in data.min_digits (",
                    o.min_digits, ")..18, got ", o.max_digits);
    HONE_USER_CHECK(!o.operators.empty(), "data.operators is empty; use some of \"+-*/\"");
    for (char c : o.operators)
      HONE_USER_CHECK(c == '+' || c == '-' || c == '*' || c == '/', "data.operators = '", o.operators,
                      "' has '", c, "'; allowed: + - * /");
    HONE_USER_CHECK(o.num_operands >= 2 && o.num_operands <= 8, "data.num_operands must be in 2..8, got ",
                    o.num_operands);
    // Exact answers are 128-bit rationals: bound the size of any intermediate value.
    HONE_USER_CHECK(o.max_digits * o.num_operands <= 36, "data.max_digits * data.num_operands must be at most 36, got ",
                    o.max_digits, " * ", o.num_operands);
    if (t == "countdown")  // targets are built in 64-bit integers
      HONE_USER_CHECK(o.max_digits * o.num_operands <= 18,
                      "data.max_digits * data.num_operands must be at most 18 for countdown, got ", o.max_digits, " * ",
                      o.num_operands);
  } else {
    HONE_USER_CHECK(o.min_length >= 1 && o.min_length <= 64, "data.min_length must be in 1..64, got ", o.min_length);
    HONE_USER_CHECK(o.max_length >= o.min_length && o.max_length <= 64, "data.max_length must be in data.min_length (",
                    o.min_length, ")..64, got ", o.max_length);
    HONE_USER_CHECK(o.alphabet == "letters" || o.alphabet == "digits", "data.alphabet = '", o.alphabet,
                    "' is not an alphabet; allowed: letters, digits");
  }
}

std::unique_ptr<SyntheticTask> make_synthetic_task(const SyntheticTaskOptions& options) {
  validate(options);
  if (options.task == "arithmetic") return make_arithmetic_task(options);
  if (options.task == "countdown") return make_countdown_task(options);
  if (options.task == "random_tokens") return make_random_tokens_task(options);
  return make_sequence_task(options);
}

std::string first_line_answer(const std::string& completion) {
  size_t end = completion.find('\n');
  if (end == std::string::npos) end = completion.size();
  size_t b = 0;
  while (b < end && (completion[b] == ' ' || completion[b] == '\t' || completion[b] == '\r')) ++b;
  while (end > b && (completion[end - 1] == ' ' || completion[end - 1] == '\t' || completion[end - 1] == '\r')) --end;
  return completion.substr(b, end - b);
}

std::vector<Prompt> SyntheticPromptSource::fetch(const std::vector<Place>& places) {
  std::vector<Prompt> out;
  out.reserve(places.size());
  for (const Place& p : places) out.push_back(task_->make(p.position));
  return out;
}

}  // namespace hone::data
