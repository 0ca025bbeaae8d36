// The weight channel: how the learner's new weights reach the generator. Colocated on the training layout it is a
// cast in place (CPU: a copy) into the generation weights; under another generation layout it is the resharding
// refit (parallel/reshard.h: one plan of all-to-all rounds between the two layouts); under expert parallelism the
// gathering of the experts' replica. Asynchronous GRPO will publish through it to generators on ranks of their
// own, with the policy version the rollouts then carry.
#pragma once

namespace hone::roles {

class WeightChannel {
 public:
  virtual ~WeightChannel() = default;
  // Collective over the ranks of both roles: the generator's weights become the learner's current ones.
  virtual void publish() = 0;
};

}  // namespace hone::roles
