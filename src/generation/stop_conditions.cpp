// Stop conditions of one sequence (rules in stop_conditions.h).
#include "generation/stop_conditions.h"

#include <algorithm>

#include "runtime/error.h"

namespace hone {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
  }
  return "?";
}

StringMatch find_stop_string(std::string_view text, const std::vector<std::string>& stop_strings, size_t new_from) {
  StringMatch best;
  new_from = std::min(new_from, text.size());
  for (size_t s = 0; s < stop_strings.size(); ++s) {
    const std::string& stop = stop_strings[s];
    if (stop.empty() || stop.size() > text.size()) continue;
    // A match ending after new_from starts at or after new_from - (size - 1).
    const size_t from = new_from + 1 > stop.size() ? new_from + 1 - stop.size() : 0;
    const size_t pos = text.find(stop, from);
    if (pos == std::string_view::npos) continue;
    if (!best.found || pos < best.position) {
      best.found = true;
      best.position = pos;
      best.string_index = static_cast<int>(s);
    }
  }
  return best;
}

StopDecision check_stop(const StopCriteria& criteria, int32_t last_token, int64_t num_new_tokens,
                        std::string_view text, size_t prev_text_size) {
  HONE_CHECK(criteria.max_new_tokens > 0, "max_new_tokens must be > 0, got ", criteria.max_new_tokens);
  HONE_CHECK(num_new_tokens >= 1 && num_new_tokens <= criteria.max_new_tokens, "token count ", num_new_tokens,
             " outside [1, ", criteria.max_new_tokens, "]");
  StopDecision d;
  if (std::find(criteria.stop_token_ids.begin(), criteria.stop_token_ids.end(), last_token) !=
      criteria.stop_token_ids.end()) {
    d.reason = FinishReason::stop;
    d.stop_token = last_token;
    return d;
  }
  d.string_match = find_stop_string(text, criteria.stop_strings, prev_text_size);
  if (d.string_match.found) {
    d.reason = FinishReason::stop;
    d.text_end = d.string_match.position;
    return d;
  }
  if (num_new_tokens >= criteria.max_new_tokens) d.reason = FinishReason::length;
  return d;
}

}  // namespace hone
