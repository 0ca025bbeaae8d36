// When a sequence stops generating: an EOS (stop) token id, a stop string in the decoded completion, or
// max_new_tokens. Checked once per generated token.
//
// Decisions (doc/grpo.md, "Stop conditions"):
// - Token ids: the stop token is kept as the last completion token (it was sampled; training sees it and its logprob).
// - Stop strings: the completion TEXT is cut BEFORE the stop string (the string is excluded, as vLLM does by
//   default); the completion TOKENS keep every token up to and including the one that completed the string, since
//   each was sampled and carries a generation logprob. The earliest match in the text wins; on equal start, the
//   stop string listed first.
// - Order of checks after a token: stop token id, then stop strings, then max_new_tokens; the first that fires
//   decides the finish reason (stop, stop, length).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hone {

enum class FinishReason : uint8_t {
  none,    // still generating
  stop,    // a stop token id or a stop string
  length,  // max_new_tokens reached
};

const char* finish_reason_name(FinishReason r);  // "none", "stop", "length"

struct StopCriteria {
  std::vector<int32_t> stop_token_ids;  // EOS ids of the tokenizer plus generation.stop_token_ids
  std::vector<std::string> stop_strings;
  int64_t max_new_tokens = 0;  // > 0
};

struct StringMatch {
  bool found = false;
  size_t position = 0;   // byte offset of the stop string in the text: the completion text is text[0, position)
  int string_index = -1; // which stop string
};

// The earliest occurrence of any stop string in `text` that ends after byte `new_from` (text before it was already
// checked). Only the last (longest stop string - 1) bytes before new_from are searched again, so checking once per
// token costs O(new bytes + longest stop string) rather than O(text).
StringMatch find_stop_string(std::string_view text, const std::vector<std::string>& stop_strings, size_t new_from = 0);

struct StopDecision {
  FinishReason reason = FinishReason::none;
  int32_t stop_token = -1;     // the stop token id that fired, else -1
  StringMatch string_match;    // the stop string that fired
  size_t text_end = std::string::npos;  // cut the completion text here (npos: keep it all)
  bool stopped() const { return reason != FinishReason::none; }
};

// Call after appending token `last_token` as the `num_new_tokens`-th generated token; `text` is the completion
// decoded so far (including that token) and `prev_text_size` the size of the text before it.
StopDecision check_stop(const StopCriteria& criteria, int32_t last_token, int64_t num_new_tokens,
                        std::string_view text, size_t prev_text_size);

}  // namespace hone
