// The per-rank device memory count of `hone run` on the GPU and its refusal message (see the header).
#include "rl/device_memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "model/layer_shape.h"
#include "model/model_config.h"
#include "parallel/pipeline_layout.h"
#include "parallel/shard_layout.h"
#include "runtime/error.h"

namespace hone::rl {
namespace {

// A tensor-parallel group runs collectives inside every layer and needs NVLink: it stays inside one node, and
// nodes hold at most 8 GPUs. A larger tp is never suggested.
constexpr int kMaxTpInNode = 8;

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GiB", bytes / double(int64_t(1) << 30));
  return b;
}

bool tp_fits_model(const ModelConfig& c, int tp) {
  try {
    layer_shape(c, tp, 0);
  } catch (const UserError&) {
    return false;
  }
  return true;
}

// What the optimizer state of the message is: "the fp32 master weights and Adam moments, whole on every rank",
// "this rank's 1/2 shard of ...", "... of this rank's 1/4 tensor-parallel shard (N parameters)".
std::string state_text(const DeviceMemoryPlan& p) {
  const std::string state = "the fp32 master weights and Adam moments";
  const std::string tp_shard = cat(" tensor-parallel shard (", p.num_params, " parameters)");
  if (p.distributed) {
    const std::string t = cat("this rank's 1/", p.dp, " shard of ", state);
    return p.tp > 1 ? cat(t, " of its 1/", p.tp, tp_shard) : t;
  }
  return p.tp > 1 ? cat(state, " of this rank's 1/", p.tp, tp_shard) : state + ", whole on every rank";
}

}  // namespace

void set_tensor_parallel(DeviceMemoryPlan& plan, const ModelConfig& c, int tp, const PipelineLayout* pipe, int ep) {
  plan.tp = tp;
  plan.num_params = 0;
  // The tp shards are equal today (KV heads replicated, vocabulary padded, experts split evenly), pipeline stages
  // need not be; the largest is what must fit.
  const int stages = pipe ? pipe->pp() : 1;
  for (int s = 0; s < stages; ++s)
    for (int r = 0; r < tp; ++r)
      plan.num_params = std::max(plan.num_params, ShardLayout::of(c, tp, r, pipe, s, ep, 0).num_local_params());
  plan.training_weights = 2.0 * double(plan.num_params);
  plan.next_tp = 0;
  for (int t = tp + 1; t <= kMaxTpInNode && plan.next_tp == 0; ++t)
    if (tp_fits_model(c, t)) plan.next_tp = t;
}

void set_generation_layout(DeviceMemoryPlan& plan, const ModelConfig& c, int tg, bool same_as_training) {
  plan.generation_copy = 0;
  plan.generation_tp = plan.next_generation_tp = 0;
  if (same_as_training) return;
  int64_t largest = 0;
  for (int r = 0; r < tg; ++r) largest = std::max(largest, ShardLayout::of(c, tg, r).num_local_params());
  // The refit's staging: a rank's share of one round of whole-model elements (parallel/reshard.h: 2^28), sent and
  // received.
  const double staging = 2.0 * 2.0 * double(std::min<int64_t>(c.num_parameters(), int64_t(1) << 28)) / tg;
  plan.generation_copy = 2.0 * double(largest) + staging;
  plan.generation_tp = tg;
  for (int t = tg + 1; t <= kMaxTpInNode && plan.next_generation_tp == 0; ++t)
    if (tp_fits_model(c, t)) plan.next_generation_tp = t;
}

void set_expert_replica(DeviceMemoryPlan& plan, const ModelConfig& c, int tp, int ep, bool replicated) {
  plan.expert_replica = 0;
  if (!c.is_moe() || ep <= 1 || !replicated) return;
  int64_t largest = 0;  // every expert of a tp rank's shard, the dense part included (generation's whole copy)
  for (int r = 0; r < tp; ++r) largest = std::max(largest, ShardLayout::of(c, tp, r).num_local_params());
  plan.expert_replica = 2.0 * double(largest);
}

double DeviceMemoryPlan::optimizer_state() const {
  const double kept = distributed ? std::ceil(double(num_params) / double(std::max(dp, 1))) : double(num_params);
  return 12.0 * kept;
}

double DeviceMemoryPlan::generation() const {
  const bool moments_out = offload || offload_during_generation;
  const double state = moments_out ? optimizer_state() / 3.0 : optimizer_state();  // the master weights stay
  // The training weights (counted as loaded already) leave too when generation has its own copy.
  const double weights_out = offload_during_generation && generation_copy > 0 ? training_weights : 0.0;
  return state + kv_cache + generation_copy - weights_out;
}

void DeviceMemoryPlan::set_activations(const std::array<double, 3>& bytes, int64_t tokens) {
  const double n = double(std::max<int64_t>(tokens, 1));
  for (size_t i = 0; i < bytes.size(); ++i) per_token[i] = bytes[i] / n;
  activations = bytes[size_t(recompute)];
}

namespace {

// This rank's tokens of a micro-batch at cp ranks: one sequence of the whole budget, padded to 2 cp chunks.
double tokens_per_rank(int64_t microbatch_tokens, int cp) {
  return 2.0 * std::ceil(double(microbatch_tokens) / (2.0 * cp));
}

// The changes that lower the training memory, cheapest first, each with the training bytes it would leave.
struct Change {
  std::string key;
  double training;
};

std::vector<Change> training_changes(const DeviceMemoryPlan& p) {
  std::vector<Change> out;
  const double rest = p.training() - p.activations;  // optimizer state and gradients
  if (!p.distributed && p.dp > 1) {
    DeviceMemoryPlan z = p;
    z.distributed = true;
    out.push_back({"train.distributed_optimizer = true (shards the optimizer state over the ranks)", z.training()});
  } else {
    out.push_back({p.distributed ? "more GPUs" : "more GPUs with train.distributed_optimizer = true", -1});
  }
  // No more GPUs and the same training: generation gives its copy back and decodes in lockstep instead.
  if (p.expert_replica > 0)
    out.push_back({"generation.experts = \"parallel\" (generation on this rank's experts: no copy of every expert)",
                   p.training() - p.expert_replica});
  const double tokens = tokens_per_rank(p.microbatch_tokens, p.cp);
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    if (int(r) <= int(p.recompute)) continue;
    const double per_token = p.per_token[size_t(r)];  // 0: not counted, suggested without an estimate
    out.push_back({cat("train.recompute = \"", recompute_name(r), "\" (",
                       r == Recompute::selective ? "reruns the norms, RoPE and SwiGLU in backward"
                                                 : "reruns each layer's forward in backward",
                       ")"),
                   per_token > 0 ? rest + per_token * tokens : -1});
  }
  const double per_token = p.per_token[size_t(p.recompute)] > 0 ? p.per_token[size_t(p.recompute)]
                                                                 : p.activations / std::max(tokens, 1.0);
  out.push_back({cat("parallel.cp = ", 2 * p.cp, " (splits each sequence's activations over ", 2 * p.cp, " GPUs)"),
                 rest + per_token * tokens_per_rank(p.microbatch_tokens, 2 * p.cp)});
  if (p.next_tp > 0)
    out.push_back({cat("parallel.tp = ", p.next_tp, " (splits the weights, gradients and optimizer state over ",
                       p.next_tp, " GPUs of a node)"),
                   p.training() * double(p.tp) / double(p.next_tp)});
  if (p.generation_copy > 0 && p.next_generation_tp > 0)
    out.push_back({cat("generation.tp = ", p.next_generation_tp, " (a smaller generation copy per GPU)"),
                   rest + p.activations - p.generation_copy * (1.0 - double(p.generation_tp) / p.next_generation_tp)});
  out.push_back({"a smaller train.max_tokens_per_microbatch", -1});
  return out;
}

}  // namespace

std::string device_memory_refusal(const DeviceMemoryPlan& p, double free_bytes) {
  const double need = std::max(p.training(), p.generation());
  if (need <= free_bytes) return {};
  const std::string state_is = state_text(p);
  std::string m = cat("the GPU cannot hold this run: ", gib(free_bytes), " free once the bf16 weights are loaded; ");
  m += cat("training needs at least ", gib(p.training()), " (", gib(p.optimizer_state()), " for ", state_is, ", ",
           gib(p.gradients()), " of fp32 gradients, ", gib(p.activations), " of activations for a ",
           p.microbatch_tokens, "-token micro-batch",
           p.cp > 1 ? cat(" split over ", p.cp, " context-parallel ranks") : std::string(),
           " with train.recompute = \"", recompute_name(p.recompute), "\"), generation at least ",
           gib(p.generation()),
           p.kv_cache > 0 ? cat(" (", gib(p.kv_cache), " of KV cache, generation.kv_cache_gib)") : std::string(),
           p.generation_copy > 0 ? cat(" with ", gib(p.generation_copy), " for generation's own copy of the weights ",
                                       "at generation.tp = ", p.generation_tp, " (both phases hold it)")
                                 : std::string(),
           ". ");
  if (p.training() < p.generation()) {
    m += "To fit: ";
    if (p.expert_replica > 0)
      m += cat("generation.experts = \"parallel\" (gives back generation's ", gib(p.expert_replica),
               " copy of every expert), ");
    if (p.generation_copy > 0 && p.next_generation_tp > 0)
      m += cat("generation.tp = ", p.next_generation_tp, " (a smaller generation copy per GPU), ");
    if (p.generation_copy > 0 && !p.offload_during_generation)
      m += "train.offload_during_generation = true or a smaller generation.kv_cache_gib";
    else
      m += p.offload || p.offload_during_generation ? "a smaller generation.kv_cache_gib"
                                                    : "train.optimizer_offload = true or a smaller generation.kv_cache_gib";
    return m;
  }
  const std::vector<Change> changes = training_changes(p);
  std::string others;
  const Change* cheapest = nullptr;
  for (const Change& c : changes) {
    if (!cheapest && c.training >= 0 && std::max(c.training, p.generation()) <= free_bytes) {
      cheapest = &c;
      continue;
    }
    others += others.empty() ? c.key : ", " + c.key;
  }
  if (cheapest) return m + cat("To fit: ", cheapest->key, ", the cheapest change that fits; or: ", others);
  return m + "To fit: " + others;
}

}  // namespace hone::rl
