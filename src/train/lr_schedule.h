// Learning-rate schedules as a function of the optimizer step (1-based: the step about to be taken):
// linear warmup from 0 over warmup_steps, then constant, or a linear or cosine decay to min_learning_rate
// reached at decay_steps (counted from step 0, warmup included) and held after it.
#pragma once

#include <string>

namespace hone {

enum class LrDecay { constant, linear, cosine };

// "constant" | "linear" | "cosine"; UserError naming the allowed values otherwise.
LrDecay parse_lr_decay(const std::string& name);
const char* lr_decay_name(LrDecay d);

struct LrSchedule {
  float learning_rate = 1e-6f;      // peak
  float min_learning_rate = 0.f;    // reached at decay_steps (linear, cosine)
  int warmup_steps = 0;
  int decay_steps = 0;              // last step of the decay; <= warmup_steps means no decay
  LrDecay decay = LrDecay::constant;

  // Learning rate for optimizer step `step` (1, 2, ...).
  float lr(int step) const;
};

}  // namespace hone
