// The GPU policy engine's pieces for expert parallelism (rl/gpu_expert_engine.h).
#include "rl/gpu_expert_engine.h"

#if HONE_CUDA


#include "comm/host_collectives.h"
#include "cuda/check.h"
#include "runtime/error.h"

namespace hone::rl {

namespace {

// Bytes of a bf16 copy of every expert, and whether it fits in 80 % of the free memory now.
double every_expert_bytes(const GpuExpertParallel& ep) {
  return double(ep.full_layout().param_layout().num_params) * 2;
}
bool every_expert_fits(const GpuExpertParallel& ep, double& free_bytes) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  free_bytes = double(free_b);
  return every_expert_bytes(ep) < 0.8 * free_bytes;
}

}  // namespace

bool generation_splits_experts(const std::string& mode, const GpuExpertParallel& ep, Comm& world) {
  if (mode == "parallel") return true;
  if (mode == "replicated") return false;
  double free_b = 0;
  // Every rank decides alike: one splitting and another not would leave the exchanges unmatched.
  const int64_t fits = every_expert_fits(ep, free_b) ? 1 : 0;
  return all_reduce_min_value(world, fits) == 0;
}

std::unique_ptr<DeviceArray<bf16>> every_expert_weights(const GpuExpertParallel& ep) {
  const ParamLayout gen = ep.full_layout().param_layout();
  double free_b = 0;
  const double need = every_expert_bytes(ep);
  HONE_USER_CHECK(every_expert_fits(ep, free_b), "parallel.ep = ", ep.size(), ": generation.experts = replicated "
                  "keeps every expert on every GPU (", need / double(int64_t(1) << 30), " GiB of bf16 weights) but "
                  "only ", free_b / double(int64_t(1) << 30), " GiB are free next to the training weights; set "
                  "generation.experts = \"parallel\" (or \"auto\") or split the model further with parallel.tp");
  return std::make_unique<DeviceArray<bf16>>(gen.num_params, "generation weights (every expert)");
}

}  // namespace hone::rl

#endif  // HONE_CUDA
