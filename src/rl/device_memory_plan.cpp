// The per-rank device memory count of `hone run` on the GPU and its refusal message (see the header).
#include "rl/device_memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/error.h"

namespace hone::rl {
namespace {

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / double(int64_t(1) << 30));
  return b;
}

}  // namespace

double DeviceMemoryPlan::optimizer_state() const {
  const double kept = distributed ? std::ceil(double(num_params) / double(std::max(dp, 1))) : double(num_params);
  return 12.0 * kept;
}

double DeviceMemoryPlan::generation() const {
  const double state = offload ? optimizer_state() / 3.0 : optimizer_state();  // the master weights stay
  return state + kv_cache;
}

std::string device_memory_refusal(const DeviceMemoryPlan& p, double free_bytes) {
  const double need = std::max(p.training(), p.generation());
  if (need <= free_bytes) return {};
  const std::string state_is = p.distributed
                                   ? cat("this rank's 1/", p.dp, " shard of the fp32 master weights and Adam moments")
                                   : "the fp32 master weights and Adam moments, whole on every rank";
  std::string m = cat("the GPU cannot hold this run: ", gib(free_bytes), " free once the bf16 weights are loaded; ");
  m += cat("training needs at least ", gib(p.training()), " (", gib(p.optimizer_state()), " for ", state_is, ", ",
           gib(p.gradients()), " of fp32 gradients, ", gib(p.activations), " of activations for a ",
           p.microbatch_tokens, "-token micro-batch), generation at least ", gib(p.generation()),
           p.kv_cache > 0 ? cat(" (", gib(p.kv_cache), " of KV cache, generation.kv_cache_gib)") : std::string(),
           ". To fit: ");
  if (!p.distributed && p.dp > 1)
    m += "train.distributed_optimizer = true (shards the optimizer state over the ranks), ";
  else if (!p.distributed)
    m += "more GPUs with train.distributed_optimizer = true, ";
  else
    m += "more GPUs, ";
  if (p.training() >= p.generation())
    m += "train.activation_recompute = true or a smaller train.max_tokens_per_microbatch";
  else
    m += p.offload ? "a smaller generation.kv_cache_gib"
                   : "train.optimizer_offload = true or a smaller generation.kv_cache_gib";
  return m;
}

}  // namespace hone::rl
