// The colocated engine's memory checks (rl/engine_memory.h).
#include "rl/engine_memory.h"

#include <array>
#include <cmath>

#include "backend/backend.h"
#include "comm/host_collectives.h"
#include "model/transformer.h"
#include "parallel/pipeline_model.h"
#include "rl/device_memory_plan.h"
#include "runtime/error.h"

namespace hone::rl {

template <typename B>
void check_memory_fits(const GrpoSettings& s, const ModelConfig& mc, const ParallelState& ps,
                       const PipelineLayout& pipe, const GenerationLayout& gen, int ranks, bool distributed,
                       const TransformerModel<B>* policy, const PipelineStage<B>* pipeline, const std::string& device,
                       double free_bytes, bool expert_replica) {
  if (!std::isfinite(free_bytes)) return;
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
  const std::string refusal = device_memory_refusal(plan, free_bytes);
  if (!refusal.empty()) throw UserError(cat(device, ": ", refusal));
}

bool generation_splits_experts(const std::string& mode, double every_expert_bytes, double free_bytes, Comm& world) {
  if (mode == "parallel") return true;
  if (mode == "replicated") return false;
  // Every rank decides alike: one splitting and another not would leave the exchanges unmatched.
  const int64_t fits = every_expert_bytes < 0.8 * free_bytes ? 1 : 0;
  return all_reduce_min_value(world, fits) == 0;
}

void check_every_expert_fits(int ep, double need, double free_bytes) {
  HONE_USER_CHECK(need < 0.8 * free_bytes, "parallel.ep = ", ep, ": generation.experts = replicated keeps every "
                  "expert on every GPU (", need / double(int64_t(1) << 30), " GiB of weights) but only ",
                  free_bytes / double(int64_t(1) << 30), " GiB are free next to the training weights; set "
                  "generation.experts = \"parallel\" (or \"auto\") or split the model further with parallel.tp");
}

#define HONE_INSTANTIATE_MEMORY_CHECK(B)                                                                          \
  template void check_memory_fits<B>(const GrpoSettings&, const ModelConfig&, const ParallelState&,              \
                                     const PipelineLayout&, const GenerationLayout&, int, bool,                  \
                                     const TransformerModel<B>*, const PipelineStage<B>*, const std::string&,    \
                                     double, bool);
HONE_FOR_EACH_BACKEND(HONE_INSTANTIATE_MEMORY_CHECK)
#undef HONE_INSTANTIATE_MEMORY_CHECK

}  // namespace hone::rl
