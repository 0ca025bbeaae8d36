// The per-rank host memory count of `hone run` on the CPU and its refusal message (see the header).
#include "rl/host_memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "comm/parallel_state.h"
#include "data/prompt_source.h"
#include "generation/rollout.h"
#include "parallel/generation_layout.h"
#include "model/layer_shape.h"
#include "model/model_config.h"
#include "model/transformer.h"
#include "parallel/shard_layout.h"
#include "reward/batch_reward.h"
#include "reward/reward.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_settings.h"
#include "runtime/error.h"
#include "runtime/host_memory.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

namespace hone::rl {
namespace {

// CPU ranks of one tensor-parallel group exchange activations inside every layer: keep the suggestion modest.
constexpr int kMaxTpSuggested = 8;

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

}  // namespace

void set_host_tensor_parallel(HostMemoryPlan& plan, const ModelConfig& c, int tp) {
  plan.tp = tp;
  plan.whole_params = c.num_parameters();
  plan.num_params = 0;
  for (int r = 0; r < tp; ++r) plan.num_params = std::max(plan.num_params, ShardLayout::of(c, tp, r).num_local_params());
  plan.next_tp = 0;
  for (int t = tp + 1; t <= kMaxTpSuggested && plan.next_tp == 0; ++t)
    if (tp_fits_model(c, t)) plan.next_tp = t;
}

double HostMemoryPlan::optimizer_state() const {
  if (!distributed) return 2.0 * weights();  // exp_avg and exp_avg_sq
  // Master weights and two moments of the 1/dp shard, and the gradient buffer's padding to a multiple of dp (the
  // gradients reduce in place: the roles count the rest).
  const double shard = std::ceil(double(num_params) / double(std::max(dp, 1)));
  return 12.0 * shard + 4.0 * (shard * double(std::max(dp, 1)) - double(num_params));
}

double HostMemoryPlan::step_sample_bytes() const {
  // The request, the rollout and the sample it becomes, one prompt token in the request and in the rollout.
  constexpr double kPerSample = double(sizeof(GenerationRequest) + sizeof(Rollout) + sizeof(GrpoSample) + 8);
  return double(step_samples) * kPerSample;
}

double HostMemoryPlan::validation_bytes() const {
  constexpr double kPerProblem = double(sizeof(data::Prompt));
  constexpr double kPerSample =
      double(sizeof(GenerationRequest) + sizeof(Rollout) + sizeof(reward::RewardQuery) + sizeof(reward::RewardResult) + 8);
  return double(validation_problems) * kPerProblem + double(validation_samples) * kPerSample;
}

double HostMemoryPlan::setup() const {
  double s = gpu ? weights() : double(roles()) * weights() + optimizer_state() + weights();  // + the initial weights
  if (random_init && tp > 1) s += whole_weights();  // drawn whole, then sliced
  return s;
}

double HostMemoryPlan::steps() const {
  return gpu ? samples() : double(roles()) * weights() + optimizer_state() + arenas() + samples();
}

double HostMemoryPlan::checkpoint(bool writer) const {
  return !gpu && (writer || resume) ? steps() + 3.0 * whole_weights() : 0.0;
}

void set_host_validation(HostMemoryPlan& plan, int64_t problems, int64_t k, int replicas) {
  plan.validation_problems = problems;
  const double share = std::ceil(double(problems) / double(std::max(1, replicas)));
  plan.validation_samples = int64_t(std::min(share * double(k), 9e18));
}

double HostMemoryPlan::peak(bool writer) const { return std::max({setup(), steps(), checkpoint(writer)}); }

HostMemoryPlan host_memory_plan(const GrpoSettings& s, const ModelConfig& c, const ParallelState& ps,
                                 bool random_init) {
  HostMemoryPlan p = host_memory_plan(s, c, ps.tp_size(), ps.dp_size(), random_init);
  p.writer_on_host = ps.world_rank() == 0 || local_size() == ps.world_size();
  p.ranks_on_host = std::max(1, local_size());
  p.generation_copy = !GenerationLayout::of(ps.grid(), s.generation_tp).same_as_training ||
                      (ps.ep_size() > 1 && s.generation_experts != "parallel");
  // The GPU engine's initial weights are this rank's pipeline stage and experts: fewer than counted; not counted.
  if (p.gpu && (ps.pp_size() > 1 || ps.ep_size() > 1)) p.num_params = 0;
  return p;
}

HostMemoryPlan host_memory_plan(const GrpoSettings& s, const ModelConfig& c, int tp, int dp, bool random_init) {
  HostMemoryPlan p;
  set_host_tensor_parallel(p, c, tp);
  p.dp = dp;
  p.distributed = s.distributed_optimizer && p.dp > 1;
  p.reference = s.loss.kl_coef > 0;
  p.random_init = random_init;
  p.resume = s.resume;
  p.gpu = s.cuda;
  p.step_samples = std::max<int64_t>(1, s.rollouts_per_step() / std::max(1, p.dp));
  // One full micro-batch, at most what this rank's share of a step can hold.
  const int64_t rollouts = std::max<int64_t>(1, s.rollouts_per_step() / std::max(1, p.dp));
  const int64_t T64 = std::min(s.max_tokens_per_microbatch, rollouts * s.max_total_sequence_length);
  const int T = int(std::min<int64_t>(T64, int64_t(1) << 30));
  const bool sp = tp > 1 && s.sequence_parallel;
  const int Tl = sp ? (T + tp - 1) / tp : T;  // a batch tp does not divide is padded
  const LayerShape shape = layer_shape(c, tp, 0);
  p.microbatch_tokens = T;
  p.activations = double(Transformer::planned_forward_bytes(c, shape, T, Tl, s.recompute) +
                         Transformer::planned_backward_bytes(c, shape, T, Tl));
  if (p.reference)  // a forward without backward: one shared layer scratch
    p.reference_activations =
        double(Transformer::planned_forward_bytes(c, shape, T, Tl, Recompute::none, /*for_backward=*/false));
  // The generator's wave: up to 256 sequences of this rank, each at least one prompt token and max_new_tokens long.
  const int64_t slots = std::min<int64_t>(256, rollouts);
  const int64_t len = std::min(s.max_total_sequence_length, 1 + s.max_new_tokens);
  p.kv_cache = 2.0 * 4.0 * double(c.num_hidden_layers) * double(slots) * double(len) * double(shape.kv_dim());
  return p;
}

void check_host_memory(const HostMemoryPlan& plan) {
  const HostMemory m = available_host_memory();
  log_debug("host memory: at least ", plan.host_need(), " bytes for the ", plan.ranks_on_host,
            " rank(s) on this host (", plan.steps(), " per rank from the first step on), ", m.bytes, " available (",
            m.limit, ")");
  const std::string refusal = host_memory_refusal(plan, m.bytes, m.limit);
  if (!refusal.empty()) throw UserError(refusal);
}

std::string host_memory_refusal(const HostMemoryPlan& p, double available, const std::string& limit) {
  if (available < 0) return {};  // unknown: nothing to say
  const double need = p.host_need();
  if (need <= available) return {};
  // Whole GiB available: ranks reading the memory at slightly different moments print the same line.
  char avail[32];
  std::snprintf(avail, sizeof avail, "%.0f GiB", std::floor(available / double(int64_t(1) << 30)));
  std::string m = cat("host memory cannot hold this run: ", avail, " available (", limit, "), at least ",
                      gib(need), " needed");
  if (p.ranks_on_host > 1) m += cat(" by the ", p.ranks_on_host, " ranks on this host");
  const std::string samples =
      cat(gib(p.samples()), " for ", p.step_samples, " rollouts of a step",
          p.dp > 1 ? " (this rank's share of grpo.num_prompts_per_step x grpo.num_generations_per_prompt)"
                   : " (grpo.num_prompts_per_step x grpo.num_generations_per_prompt)",
          p.validation_samples > 0 ? cat(" and ", p.validation_problems, " validation problems with ",
                                         p.validation_samples, " completions (validation.max_samples x "
                                         "validation.num_generations)")
                                   : std::string(),
          ", at least their records");
  if (p.gpu) {
    m += cat(": ", p.ranks_on_host > 1 ? "each rank holds " : "", "the initial fp32 weights of ",
             p.tp > 1 ? cat("its 1/", p.tp, " tensor-parallel shard of ", p.num_params, " parameters")
                      : cat("the model's ", p.num_params, " parameters"),
             p.random_init && p.tp > 1 ? " and the whole drawn model" : "", " while the engine is built (",
             gib(p.setup()), ") and ", samples, ". To fit: ");
    if (p.next_tp > 0) m += cat("parallel.tp = ", p.next_tp, ", ");
    if (p.ranks_on_host > 1) m += "fewer ranks per host, ";
    m += "fewer prompts per step or validation problems, or a smaller model";
    return m;
  }
  m += cat(": ", p.ranks_on_host > 1 ? "each rank holds " : "", p.roles(), " fp32 copies of ",
           p.tp > 1 ? cat("its 1/", p.tp, " tensor-parallel shard of ", p.num_params, " parameters")
                    : cat("the model's ", p.num_params, " parameters"),
           " (training, ", p.generation_copy ? "generation, " : "", "gradients", p.reference ? ", reference" : "",
           ") = ",
           gib(double(p.roles()) * p.weights()), ", ", gib(p.optimizer_state()),
           p.distributed ? cat(" of AdamW state (a 1/", p.dp, " shard)") : std::string(" of AdamW moments"), ", ",
           gib(p.activations + p.reference_activations), " of activations for a ", p.microbatch_tokens,
           "-token micro-batch, ", gib(p.kv_cache), " of KV cache and ", samples, " (", gib(p.steps()),
           " from the first step on)");
  const double whole_state = 3.0 * p.whole_weights();
  if (p.writer_on_host && p.checkpoint(p.writer_on_host) > p.steps())
    m += cat("; writing a checkpoint, rank 0 also gathers the whole model's weights and moments (", gib(whole_state),
             ")");
  else if (p.resume && p.checkpoint(p.writer_on_host) > p.steps())
    m += cat("; resuming, every rank also reads the whole model's weights and moments (", gib(whole_state), ")");
  if (p.setup() > p.steps() && p.setup() >= p.checkpoint(p.writer_on_host))
    m += cat("; while the run is set up the initial weights", p.random_init && p.tp > 1 ? " and the whole drawn model" : "",
             " are held too (", gib(p.setup()), ")");
  m += ". To fit: ";
  // The samples dominate: the model's keys would change nothing.
  if (p.samples() > 0.5 * p.steps())
    return m + "fewer prompts per step or validation problems, fewer completions of each" +
           (p.step_sample_bytes() < p.validation_bytes()
                ? std::string()
                : std::string(", or more data-parallel ranks (they share a step's rollouts)"));
  if (p.next_tp > 0)
    m += cat("parallel.tp = ", p.next_tp, " (splits the weights, gradients and optimizer state over ", p.next_tp,
             " ranks), ");
  if (!p.distributed)
    m += p.dp > 1 ? "train.distributed_optimizer = true (shards the AdamW state over the ranks), "
                  : "more ranks with train.distributed_optimizer = true, ";
  if (p.reference) m += "loss.kl_coef = 0 (no reference copy), ";
  if (p.ranks_on_host > 1) m += "fewer ranks per host, ";
  if (p.samples() > 0.25 * p.steps()) m += "fewer prompts per step or validation problems, ";
  m += "train.recompute = \"full\" or a smaller train.max_tokens_per_microbatch, or a smaller model";
  return m;
}

std::string model_host_memory_refusal(const ModelConfig& c, int copies, const std::string& command, double available,
                                      const std::string& limit) {
  if (available < 0) return {};
  const double params = c.parameter_count_bound(), need = 4.0 * double(copies) * params;
  if (need <= available) return {};
  char avail[32];
  std::snprintf(avail, sizeof avail, "%.0f GiB", std::floor(available / double(int64_t(1) << 30)));
  char count[32];
  std::snprintf(count, sizeof count, "%.4g", params);
  return cat(command, ": host memory cannot hold the model: ", avail, " available (", limit, "), at least ", gib(need),
             " needed for ", copies == 1 ? "one fp32 copy" : cat(copies, " fp32 copies"), " of its ", count,
             " parameters", copies > 1 ? " (the weights and their gradients)" : "",
             ": run it on a machine with more memory, or on a smaller model");
}

void check_host_memory_for_model(const ModelConfig& c, int copies, const std::string& command) {
  const HostMemory m = available_host_memory();
  const std::string refusal = model_host_memory_refusal(c, copies, command, m.bytes, m.limit);
  if (!refusal.empty()) throw UserError(refusal);
}

}  // namespace hone::rl
