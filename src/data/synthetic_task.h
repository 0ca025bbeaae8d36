// Built-in synthetic tasks: arithmetic, countdown, sort, reverse (and random_tokens for benchmarks). Each generates prompt and exact answer as a pure
// function of (seed, index), so shards and resumed runs see the same examples, and scores its own answers.
// Prompts are short plain ASCII meant for a character-level tokenizer, e.g. "12+7=" with the completion "19".
// The answer a model gives is its completion up to the first newline, spaces trimmed (see doc/data-and-rewards.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/prompt_source.h"
#include "reward/reward.h"

namespace hone::data {

// Deck keys in brackets.
struct SyntheticTaskOptions {
  std::string task = "arithmetic";  // [data.task] arithmetic | countdown | sort | reverse | random_tokens
  int min_digits = 1;               // [data.min_digits] operand digits (arithmetic, countdown)
  int max_digits = 2;               // [data.max_digits]
  std::string operators = "+-";     // [data.operators] a subset of "+-*/"
  int num_operands = 2;             // [data.num_operands] operands of arithmetic, numbers given in countdown
  int min_length = 3;               // [data.min_length] sort/reverse string length
  int max_length = 6;               // [data.max_length]
  std::string alphabet = "letters"; // [data.alphabet] letters (a-z) | digits (0-9)
  bool partial_credit = false;      // [data.partial_credit] sort, reverse: a wrong answer earns its share of the answer
  int prompt_tokens = 128;          // [data.prompt_tokens] random_tokens: ids per prompt
  int vocab_size = 0;               // random_tokens: ids are drawn from [0, vocab_size) (the model's vocabulary)
  uint64_t seed = 0;                // [run.seed]
};

// Throws UserError naming the data.* key when an option is out of range.
void validate(const SyntheticTaskOptions& options);

class SyntheticTask : public reward::RewardFunction {
 public:
  // Example `index` (any index >= 0): prompt text, one user message, exact answer, id = index.
  virtual Prompt make(int64_t index) const = 0;
};

// The task named by options.task (validated first).
std::unique_ptr<SyntheticTask> make_synthetic_task(const SyntheticTaskOptions& options);

// The model's answer: the completion up to its first newline, spaces and tabs trimmed at both ends.
std::string first_line_answer(const std::string& completion);

// An endless stream of a task's examples: position p of the stream is example p (epochs never roll over).
class SyntheticPromptSource : public PromptSource {
 public:
  explicit SyntheticPromptSource(std::shared_ptr<const SyntheticTask> task) : task_(std::move(task)) {}
  int64_t epoch_size() const override { return kEndless; }
  std::string describe() const override { return "synthetic task '" + task_->name() + "'"; }
  const SyntheticTask& task() const { return *task_; }

 protected:
  std::vector<Prompt> fetch(const std::vector<Place>& places) override;

 private:
  std::shared_ptr<const SyntheticTask> task_;
};

}  // namespace hone::data
