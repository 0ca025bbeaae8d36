// The checks of a generate() call and the requests of GRPO groups (rollout.h).
#include "generation/rollout.h"

#include "runtime/error.h"

namespace hone {

void validate_generation_call(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                              const StopCriteria& stop, int max_total_sequence_length, bool can_decode,
                              int vocab_size) {
  validate_sampling_params(sampling);
  HONE_USER_CHECK(stop.max_new_tokens > 0, "max_new_tokens must be > 0, got ", stop.max_new_tokens);
  HONE_USER_CHECK(stop.stop_strings.empty() || can_decode, "stop strings need a tokenizer to decode completions");
  HONE_USER_CHECK(max_total_sequence_length > 1, "max_total_sequence_length must be > 1, got ",
                  max_total_sequence_length);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    HONE_USER_CHECK(!r.prompt.empty(), "request ", i, " has an empty prompt");
    HONE_USER_CHECK(int64_t(r.prompt.size()) < max_total_sequence_length, "request ", i, " has a prompt of ",
                    r.prompt.size(), " tokens, which leaves no room for a completion under ",
                    "max_total_sequence_length = ", max_total_sequence_length);
    HONE_USER_CHECK(r.sample_index >= 0 && r.sample_index <= int64_t(UINT32_MAX), "request ", i,
                    " has sample index ", r.sample_index, " outside [0, 2^32)");
    HONE_USER_CHECK(r.max_new_tokens >= 0 && r.max_new_tokens <= stop.max_new_tokens, "request ", i,
                    " has max_new_tokens = ", r.max_new_tokens, " outside [0, ", stop.max_new_tokens,
                    "] (0: the call's max_new_tokens)");
    for (int32_t t : r.prompt)
      HONE_USER_CHECK(t >= 0 && t < vocab_size, "request ", i, " has token id ", t,
                      " outside the vocabulary [0, ", vocab_size, ")");
  }
}

std::vector<GenerationRequest> group_requests(const std::vector<std::vector<int32_t>>& prompts, int G,
                                              int64_t first_sample_index) {
  HONE_USER_CHECK(G > 0, "generations per prompt must be > 0, got ", G);
  std::vector<GenerationRequest> out;
  out.reserve(prompts.size() * size_t(G));
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int g = 0; g < G; ++g) out.push_back({prompts[p], first_sample_index + int64_t(p) * G + g});
  return out;
}

}  // namespace hone
