// What one CPU rank of `hone run` (run.device = cpu) must hold in host memory, counted before any weight is
// allocated, so that a run that cannot fit ends at once with the numbers and the deck keys that change them instead
// of a failed allocation ("host allocation of N bytes failed") or the kernel's out-of-memory killer minutes later.
// The twin of the GPU planner (rl/device_memory_plan.h). What the engine (rl/colocated_engine.cpp) holds on the CPU,
// in fp32, for this rank's tensor-parallel shard of P parameters:
//   roles      training (= master, and generation's when the layouts coincide) weights, gradients, the generation
//              weights of a generation layout of its own (pipeline or context parallelism, another generation.tp)
//              or of every expert (parallel.ep with generation.experts other than parallel), and the frozen
//              reference when loss.kl_coef > 0: 2 to 4 x 4P bytes
//   optimizer  the AdamW moments: 2 x 4P whole on every rank, or under ZeRO-1 (train.distributed_optimizer, dp > 1)
//              this rank's 1/dp shard of master weights and moments (the gradients reduce in place, in a buffer
//              padded to a multiple of dp)
//   setup      while the engine is built the initial weights are held too (4P), and a random init under tensor
//              parallelism first draws the whole model (4 x all parameters) before slicing it
//   arenas     the forward and backward arenas of one full micro-batch (train.max_tokens_per_microbatch tokens, at
//              most what a step can hold), the reference model's forward arena, the generation KV cache of one
//              wave (at least one prompt token and max_new_tokens per sequence): kept from step to step
//   checkpoint the rank that writes checkpoints (world rank 0) gathers the whole model's weights and both moments
//              (3 x 4 x all parameters), and resuming reads them on every rank
//   samples    the rollouts of a step on this rank and those of a validation, each at least its records (request,
//              rollout, sample, reward) and one prompt token: what grpo.num_prompts_per_step x
//              grpo.num_generations_per_prompt and validation.max_samples x validation.num_generations make it hold
// On the GPU (run.device = cuda) the host holds the initial fp32 weights of this rank while the engine is built, and
// the samples; the device's own plan is rl/device_memory_plan.h.
// The counts leave out library buffers and the text of prompts and completions: a refusal is certain to be right.
// Ranks on one host share its memory: the host must hold this rank and the others of the node.
#pragma once

#include <cstdint>
#include <string>

namespace hone {
struct ModelConfig;
class ParallelState;
}

namespace hone::rl {

struct GrpoSettings;

struct HostMemoryPlan {
  int64_t num_params = 0;     // parameters this rank holds: its tensor-parallel shard (the whole model at tp = 1)
  int64_t whole_params = 0;   // parameters of the whole model
  int tp = 1;                 // parallel.tp
  int next_tp = 0;            // the next larger parallel.tp the model allows; 0: none
  int dp = 1;                 // data-parallel ranks
  bool distributed = false;   // ZeRO-1 over dp
  bool reference = false;     // loss.kl_coef > 0
  bool generation_copy = false;  // generation holds weights of its own (a layout of its own, or every expert)
  bool random_init = false;   // no model.path: the weights are drawn
  // World rank 0, which gathers and writes the checkpoints, runs on this host (every rank of a one-host run says so,
  // so that they all print the same refusal).
  bool writer_on_host = false;
  bool resume = false;        // run.resume = auto: every rank reads a checkpoint's whole state
  int ranks_on_host = 1;      // ranks sharing this host's memory (this one included)
  double activations = 0;     // bytes of the training arenas of one micro-batch (forward and backward)
  double reference_activations = 0;  // bytes of the reference model's forward arena
  int64_t microbatch_tokens = 0;
  double kv_cache = 0;        // bytes of the generation KV cache of one wave
  bool gpu = false;           // run.device = cuda: the host holds the initial weights and the samples only
  int64_t step_samples = 0;   // rollouts of a step this rank holds (its share of prompts x generations)
  int64_t validation_problems = 0;  // problems a validation reads (all of them, on every rank)
  int64_t validation_samples = 0;   // completions of a validation this rank holds

  double weights() const { return 4.0 * double(num_params); }  // one fp32 copy of this rank's shard
  double whole_weights() const { return 4.0 * double(whole_params); }
  int roles() const { return 2 + (generation_copy ? 1 : 0) + (reference ? 1 : 0); }
  double optimizer_state() const;
  double arenas() const { return activations + reference_activations + kv_cache; }
  double step_sample_bytes() const;        // at least, for step_samples
  double validation_bytes() const;         // at least, for the validation's problems and samples
  double samples() const { return step_sample_bytes() + validation_bytes(); }
  double setup() const;      // while the engine is built
  double steps() const;      // from the first step on
  double checkpoint(bool writer) const;  // the whole state gathered (the writer), or read on resume (every rank)
  double peak(bool writer) const;        // the largest of the three for one rank
  // The ranks of this host together: the writer (when here) and the others.
  double host_need() const { return peak(writer_on_host) + double(ranks_on_host - 1) * peak(false); }
};

// Fills tp, num_params (the largest of the tp ranks' shards), whole_params and next_tp for the model c.
void set_host_tensor_parallel(HostMemoryPlan& plan, const ModelConfig& c, int tp);

// The plan of one rank of a CPU run of the deck's settings on model c over tp x dp ranks (random_init: no
// model.path), as if alone on its host and not the writer; the second form fills those from this rank's place.
HostMemoryPlan host_memory_plan(const GrpoSettings& s, const ModelConfig& c, int tp, int dp, bool random_init);
HostMemoryPlan host_memory_plan(const GrpoSettings& s, const ModelConfig& c, const ParallelState& ps, bool random_init);

// Sets the validation's counts: n problems, k completions each, over `replicas` generation replicas.
void set_host_validation(HostMemoryPlan& plan, int64_t problems, int64_t k, int replicas);

// UserError with the refusal when the plan does not fit the host memory this process may take now
// (runtime/host_memory.h).
void check_host_memory(const HostMemoryPlan& plan);

// Empty when the plan fits in available_bytes (limit: what bounds it, for the message); else the refusal: every
// number and what to change.
std::string host_memory_refusal(const HostMemoryPlan& plan, double available_bytes, const std::string& limit);

// hone logprobs and hone convert hold `copies` fp32 copies of the whole model c (weights; gradients) on the host:
// UserError naming the need and what is available, before anything is allocated, when that cannot fit.
void check_host_memory_for_model(const ModelConfig& c, int copies, const std::string& command);
std::string model_host_memory_refusal(const ModelConfig& c, int copies, const std::string& command,
                                      double available_bytes, const std::string& limit);

}  // namespace hone::rl
