// Tiny random transformers for the generation tests, and a plain full-sequence forward (no cache) built from the
// ops, the reference that generation's cached prefill + decode must reproduce.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"

namespace test {

enum class TinyKind {
  qwen3_tied,     // qk_norm, GQA 2, tied lm_head
  qwen3_untied,   // qk_norm, GQA 2, separate lm_head
  qwen2_untied,   // q/k/v biases, GQA 4
  llama_mha,      // neither, GQA 1, tied
};

// A model laid out by the parameter table with uniform(-0.5, 0.5) weights (norm weights around 1). Values are large
// enough that logits are far from uniform.
struct TinyModel {
  hone::ModelConfig config;
  hone::ModelWeights weights;
};

TinyModel tiny_model(TinyKind kind, uint64_t seed);

// Logits [T, V] of every position of one sequence (no temperature), by a straightforward full forward.
std::vector<float> full_forward_logits(const TinyModel& m, const std::vector<int32_t>& tokens);

// log_softmax(logits / temperature)[completion[i]] at every completion position of prompt + completion, through
// the training-side LM head (lm_head_logprob_forward) over the full forward's final hidden states.
std::vector<float> full_forward_logprobs(const TinyModel& m, const std::vector<int32_t>& prompt,
                                         const std::vector<int32_t>& completion, float temperature);

}  // namespace test
