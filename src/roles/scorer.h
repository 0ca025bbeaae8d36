// The scorer role: a frozen model that scores the step's rollouts by its logprobs. Today it is the reference policy
// of the KL term (loss.kl_coef > 0); a teacher of distillation or a critic of PPO is another scorer. It runs the
// learner's forward without backward on weights of its own, which never change.
#pragma once

#include <cstdint>
#include <vector>

#include "model/packed_batch.h"

namespace hone::roles {

class Scorer {
 public:
  virtual ~Scorer() = default;
  // The reference weights' logprobs of every packed batch of a pass into out, as Learner::policy_logprobs.
  virtual void reference_logprobs(const std::vector<const PackedBatch*>& batches, float temperature,
                                  const std::vector<const int32_t*>& forced_routing,
                                  const std::vector<std::vector<float>*>& out) = 0;
};

}  // namespace hone::roles
