// Finding the final answer in a model's math solution. In order of precedence:
//   1. the last \boxed{...} or \fbox{...} (balanced braces, may nest; "\boxed 5" without braces too)
//   2. the last "#### X" (GSM8K style): the rest of that line
//   3. the last "the answer is X" / "final answer: X" / "answer: X" (case-insensitive): the rest of that line,
//      cut at the end of its first sentence
//   4. when enabled, the last number in the text ("-1,234.5", "3/4")
// Works on bytes: any input is accepted, none is copied more than a few times.
#pragma once

#include <string>

namespace hone::reward {

enum class AnswerSource { none, boxed, hashes, phrase, last_number };
const char* answer_source_name(AnswerSource s);

struct ExtractedAnswer {
  AnswerSource source = AnswerSource::none;
  std::string text;  // the raw answer text (not yet normalized)
  bool found() const { return source != AnswerSource::none; }
};

ExtractedAnswer extract_final_answer(const std::string& completion, bool fallback_last_number = true);

// The content of the last complete \boxed{} / \fbox{} (source boxed), or none.
ExtractedAnswer extract_boxed(const std::string& text);

}  // namespace hone::reward
