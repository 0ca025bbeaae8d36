// The sampling settings of generation (rules: generation/sampler.h), shared by the CPU sampler and the sampler op of
// each backend. Plain header.
#pragma once

#include <cstdint>

namespace hone {

struct SamplingParams {
  float temperature = 1.0f;  // > 0
  int64_t top_k = 0;         // 0 (or >= vocab): off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1]; 0: off
  bool greedy = false;
};

}  // namespace hone
