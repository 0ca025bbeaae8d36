// The GPU policy engine's memory check (rl/gpu_memory_check.h).
#include "rl/gpu_memory_check.h"

#if HONE_CUDA

#include <array>

#include "cuda/check.h"
#include "rl/device_memory_plan.h"
#include "runtime/error.h"

namespace hone::rl {

void check_gpu_memory_fits(const GrpoSettings& s, const ModelConfig& mc, const ParallelState& ps,
                           const PipelineLayout& pipe, const GenerationLayout& gen, int ranks, bool distributed,
                           const GpuTransformer* policy, const GpuPipelineModel* pipeline, const std::string& device,
                           bool expert_replica) {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  DeviceMemoryPlan plan;
  // This rank's shard of its stage's parameters (and of the experts), not the model's.
  set_tensor_parallel(plan, mc, ps.tp_size(), &pipe, ps.ep_size());
  set_generation_layout(plan, mc, gen.tg, gen.same_as_training);
  set_expert_replica(plan, mc, ps.tp_size(), ps.ep_size(), expert_replica);
  plan.dp = ranks;
  plan.cp = ps.cp_size();
  plan.distributed = distributed;
  plan.offload = s.optimizer_offload;
  plan.offload_during_generation = s.offload_during_generation;
  plan.microbatch_tokens = s.max_tokens_per_microbatch;
  plan.recompute = s.recompute;
  if (pipeline) {  // the stage's micro-batches in flight under its schedule, at the recompute chosen
    plan.activations = double(pipeline->activation_bytes_bound(int(s.max_tokens_per_microbatch)));
  } else {
    const int T = policy->local_tokens(int(s.max_tokens_per_microbatch));  // this rank's rows
    std::array<double, 3> bytes{};
    for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
      bytes[size_t(r)] = double(policy->training_bytes(T, r));
    plan.set_activations(bytes, T);
  }
  plan.kv_cache = s.kv_cache_gib * double(int64_t(1) << 30);
  const std::string refusal = device_memory_refusal(plan, double(free_b));
  if (!refusal.empty()) throw UserError(cat(device, ": ", refusal));
}

}  // namespace hone::rl

#endif  // HONE_CUDA
