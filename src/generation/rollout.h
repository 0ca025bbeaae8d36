// What a generator is asked and what it gives back, the same for every engine (CPU, GPU, a generation replica of
// its own): a request (a prompt, the global sample index that keys its random numbers, its own length limit) and a
// rollout (the completion, its generation logprobs, why it stopped, the experts it was routed to), with the checks
// every generate() call makes and the requests of GRPO groups.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "generation/sampler.h"
#include "generation/stop_conditions.h"

namespace hone {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // token ids, non-empty
  int64_t sample_index = 0;     // global index of this sample in the step (keys its random numbers), in [0, 2^32)
  // This request's own length limit, in [1, the call's StopCriteria::max_new_tokens]; 0: the call's. A completion
  // that reaches it stops with finish reason `length`, as at the call's limit; the KV cache is sized by it.
  int64_t max_new_tokens = 0;
};

// The length limit of a request: its own, or the call's.
inline int64_t max_new_tokens_of(const GenerationRequest& r, const StopCriteria& stop) {
  return r.max_new_tokens > 0 ? r.max_new_tokens : stop.max_new_tokens;
}

struct Rollout {
  std::vector<int32_t> prompt;
  std::vector<int32_t> completion;  // every sampled token, a stop token or the token completing a stop string included
  std::vector<float> logprobs;      // one per completion token: log_softmax(logits / T)[token], full vocabulary
  FinishReason finish_reason = FinishReason::none;  // stop or length once generated
  std::string text;                 // the decoded completion cut before a stop string (empty without a decoder)
  int64_t sample_index = 0;
  // Mixture of experts: the experts generation routed each fed token to, position by position (the prompt and the
  // completion but its last token: prompt + completion - 1 rows), sparse layer by sparse layer, k per layer (the
  // router's order). Empty for a dense model.
  std::vector<uint16_t> routing;
};

// The requests of GRPO groups: G samples of every prompt, prompt p's sample g with sample index
// first_sample_index + p * G + g (give each rank's first prompt its global index so indices never repeat).
std::vector<GenerationRequest> group_requests(const std::vector<std::vector<int32_t>>& prompts, int G,
                                              int64_t first_sample_index = 0);

// The checks every generator makes on a generate() call (UserError naming the bad request or setting): sampling
// parameters, max_new_tokens (the call's, and a request's own above it), stop strings without a decoder, prompts
// empty / too long / outside the vocabulary, sample indices outside [0, 2^32).
void validate_generation_call(const std::vector<GenerationRequest>& requests, const SamplingParams& sampling,
                              const StopCriteria& stop, int max_total_sequence_length, bool can_decode,
                              int vocab_size);

// Turns token ids into text (a tokenizer's decode); needed for stop strings, and fills Rollout::text.
using DecodeFunction = std::function<std::string(const std::vector<int32_t>&)>;

}  // namespace hone
