// The GPU policy engine (run.device = "cuda"): see rl/policy_engine.h.
#include "rl/policy_engine.h"
#include "runtime/error.h"

namespace hone::rl {

std::unique_ptr<PolicyEngine> make_gpu_policy_engine(const GrpoSettings&, const ModelConfig&, const ModelWeights&) {
  throw UserError("run.device = \"cuda\": not available yet in this build (run.device = \"cpu\")");
}

}  // namespace hone::rl
