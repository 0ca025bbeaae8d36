// Learning-rate schedules: warmup, then constant, linear or cosine decay.
#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace hone {

LrDecay parse_lr_decay(const std::string& name) {
  if (name == "constant") return LrDecay::constant;
  if (name == "linear") return LrDecay::linear;
  if (name == "cosine") return LrDecay::cosine;
  throw UserError(cat("unknown learning-rate schedule '", name, "' (allowed: constant, linear, cosine)"));
}

const char* lr_decay_name(LrDecay d) {
  switch (d) {
    case LrDecay::constant: return "constant";
    case LrDecay::linear: return "linear";
    case LrDecay::cosine: return "cosine";
  }
  return "?";
}

float LrSchedule::lr(int step) const {
  const double peak = learning_rate;
  if (warmup_steps > 0 && step <= warmup_steps) return float(peak * std::max(step, 0) / warmup_steps);
  if (decay == LrDecay::constant || decay_steps <= warmup_steps) return float(peak);
  const double progress = std::min(1.0, double(step - warmup_steps) / double(decay_steps - warmup_steps));
  const double lo = min_learning_rate;
  if (decay == LrDecay::linear) return float(lo + (peak - lo) * (1.0 - progress));
  return float(lo + (peak - lo) * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace hone
