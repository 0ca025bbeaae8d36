// Reading and checking the loop's deck keys (see grpo_settings.h).
#include "rl/grpo_settings.h"

#include "parallel/pp_check.h"
#include "parallel/tp_check.h"

#include "config/config.h"
#include "runtime/error.h"

namespace hone::rl {

namespace {

// The parallelism hone run supports today: data, tensor, pipeline, context and expert parallelism.
void check_parallel_supported(const Config& c) {
  const int64_t pp = c.get_int("parallel.pp"), cp = c.get_int("parallel.cp");
  HONE_USER_CHECK(pp == 1 || cp == 1, "parallel.pp = ", pp, " with parallel.cp = ", cp,
                  ": pipeline and context parallelism together are not supported yet (set one of them to 1)");
  const int64_t ep = c.get_int("parallel.ep");
  HONE_USER_CHECK(ep == 1 || !c.get_bool("train.distributed_optimizer"), "parallel.ep = ", ep,
                  " with train.distributed_optimizer = true: the distributed optimizer does not shard expert "
                  "parallelism's state yet (set train.distributed_optimizer = false)");
  HONE_USER_CHECK(ep == 1 || (pp == 1 && cp == 1), "parallel.ep = ", ep, " with parallel.pp = ", pp,
                  " and parallel.cp = ", cp, ": expert parallelism together with pipeline or context parallelism is "
                  "not supported yet (set parallel.pp and parallel.cp to 1)");
  const int64_t tg = c.get_int("generation.tp");
  HONE_USER_CHECK(ep == 1 || tg == 0 || tg == c.get_int("parallel.tp"), "parallel.ep = ", ep, " with generation.tp = ",
                  tg, ": under expert parallelism generation runs on the training layout (set generation.tp to 0)");
}

// [run], and the parallelism this loop supports.
void read_run_keys(const Config& c, GrpoSettings& s) {
  s.run_name = c.get_string("run.name");
  s.seed = uint64_t(c.get_int("run.seed"));
  s.max_steps = c.get_int("run.max_steps");
  s.resume = c.get_string("run.resume") == "auto";
  s.cuda = c.get_string("run.device") == "cuda";

  check_parallel_supported(c);
}

void read_grpo_keys(const Config& c, GrpoSettings& s) {
  s.prompts_per_step = c.get_int("grpo.num_prompts_per_step");
  s.generations = c.get_int("grpo.num_generations_per_prompt");
  s.advantages.normalize_rewards = c.get_bool("grpo.normalize_rewards");
  s.advantages.leave_one_out_baseline = c.get_bool("grpo.use_leave_one_out_baseline");
  s.dynamic_sampling = c.get_bool("grpo.use_dynamic_sampling");
  s.dynamic_max_batches = c.get_int("grpo.dynamic_sampling_max_gen_batches");
  s.overlong_filtering = c.get_bool("grpo.overlong_filtering");
}

void read_loss_keys(const Config& c, GrpoSettings& s) {
  s.loss.ratio_clip_min = c.get_float("loss.ratio_clip_min");
  s.loss.ratio_clip_max = c.get_float("loss.ratio_clip_max");
  s.loss.ratio_clip_c = c.get_float("loss.ratio_clip_c");
  s.loss.kl_coef = c.get_float("loss.kl_coef");
  s.loss.kl_type = parse_kl_type(c.get_string("loss.kl_type"));
  s.loss.kl_input_clamp = c.get_float("loss.kl_input_clamp");
  s.loss.kl_output_clamp = c.get_float("loss.kl_output_clamp");
  s.loss.aggregation = parse_loss_aggregation(c.get_string("loss.aggregation"));
  s.loss.importance_sampling = parse_importance_sampling(c.get_string("loss.importance_sampling"));
  s.loss.is_threshold_low = c.get_float("loss.is_threshold_low");
  s.loss.is_threshold_high = c.get_float("loss.is_threshold_high");
  s.loss.entropy_coef = c.get_float("loss.entropy_coef");
  validate_policy_loss_config(s.loss);
  s.skip_prev_logprobs_on_policy = c.get_bool("loss.skip_prev_logprobs_on_policy");
  if (c.has_value("loss.moe_aux_loss_coef")) s.moe_aux_loss_coef = c.get_float("loss.moe_aux_loss_coef");
  s.router_replay = c.get_bool("loss.router_replay");
}

void read_generation_keys(const Config& c, GrpoSettings& s) {
  s.sampling.temperature = float(c.get_float("generation.temperature"));
  s.sampling.top_k = c.get_int("generation.top_k");
  s.sampling.top_p = float(c.get_float("generation.top_p"));
  s.sampling.min_p = float(c.get_float("generation.min_p"));
  s.sampling.greedy = c.get_bool("generation.greedy");
  validate_sampling_params(s.sampling);
  s.max_new_tokens = c.get_int("generation.max_new_tokens");
  s.max_total_sequence_length = c.get_int("generation.max_total_sequence_length");
  s.stop_strings = c.get_string_list("generation.stop_strings");
  s.stop_token_ids = c.get_int_list("generation.stop_token_ids");
  s.ignore_eos = c.get_bool("generation.ignore_eos");
  s.kv_cache_gib = c.get_float("generation.kv_cache_gib");
  s.kv_cache_memory_fraction = c.get_float("generation.kv_cache_memory_fraction");
  s.kv_block_size = int(c.get_int("generation.kv_block_size"));
  s.cuda_graphs = c.get_bool("generation.cuda_graphs");
  s.keep_graphs = c.get_bool("generation.keep_graphs");
  s.generation_tp = deck_generation_tp(c);
  s.generation_experts = c.get_string("generation.experts");
}

// [train], and parallel.nccl_timeout_s.
void read_train_keys(const Config& c, GrpoSettings& s) {
  s.lr.learning_rate = float(c.get_float("train.learning_rate"));
  s.lr.min_learning_rate = float(c.get_float("train.min_learning_rate"));
  s.lr.decay = parse_lr_decay(c.get_string("train.lr_schedule"));
  s.lr.warmup_steps = int(c.get_int("train.warmup_steps"));
  s.adamw.beta1 = float(c.get_float("train.adam_beta1"));
  s.adamw.beta2 = float(c.get_float("train.adam_beta2"));
  s.adamw.eps = float(c.get_float("train.adam_eps"));
  s.adamw.weight_decay = float(c.get_float("train.weight_decay"));
  s.max_grad_norm = c.get_float("train.max_grad_norm");
  s.max_nonfinite_updates = c.get_int("train.max_nonfinite_updates");
  s.global_batch_size = c.get_int("train.global_batch_size");
  s.max_tokens_per_microbatch = c.get_int("train.max_tokens_per_microbatch");
  s.recompute = parse_recompute(c.get_string("train.recompute"));
  if (c.get_bool("train.activation_recompute")) s.recompute = Recompute::full;  // the older spelling
  s.distributed_optimizer = c.get_bool("train.distributed_optimizer");
  s.sequence_parallel = c.get_bool("parallel.sequence_parallel");
  s.tp_comm_overlap = c.get_bool("parallel.tp_comm_overlap");
  s.tp_comm_overlap_chunks = int(c.get_int("parallel.tp_comm_overlap_chunks"));
  s.grad_reduce_in_fp32 = c.get_bool("train.grad_reduce_in_fp32");
  s.optimizer_offload = c.get_bool("train.optimizer_offload");
  s.offload_during_generation = c.get_bool("train.offload_during_generation");
  s.tp = int(c.get_int("parallel.tp"));
  s.pp = int(c.get_int("parallel.pp"));
  s.vpp = int(c.get_int("parallel.vpp"));
  s.pp_layers = c.get_int_list("parallel.pp_layers");
  s.nccl_timeout_s = c.get_float("parallel.nccl_timeout_s");
  // The GPU layer's selective rerun works on whole token rows; under sequence parallelism its norms would need
  // the rank's rows and a second all-gather.
  HONE_USER_CHECK(!(s.cuda && s.recompute == Recompute::selective && s.tp > 1 && s.sequence_parallel),
                  "train.recompute = \"selective\" with parallel.sequence_parallel at parallel.tp = ", s.tp,
                  " is not supported on the GPU engine yet: use \"full\", or parallel.sequence_parallel = false");
}

// [checkpoint] and [output].
void read_output_keys(const Config& c, GrpoSettings& s) {
  s.checkpoint_every = c.get_int("checkpoint.every");
  s.checkpoint_at_exit = c.get_bool("checkpoint.save_at_exit");
  s.checkpoint_hf_folder = c.get_bool("checkpoint.hf_folder");
  s.checkpoint_bf16 = c.get_string("checkpoint.dtype") == "bfloat16";
  const std::string rollouts = c.get_string("output.rollouts");
  s.sample_every = rollouts == "none" ? 0 : c.get_int("output.sample_every");
  s.num_samples = c.get_int("output.num_samples");
  s.all_rollouts = rollouts == "all";
  s.overwrite = c.get_bool("output.overwrite");
}

// The batch sizes divide the step's rollouts and the data-parallel ranks; the longest sequence fits a micro-batch.
void check_batch_sizes(const Config& c, GrpoSettings& s, int dp) {
  const int64_t rollouts = s.rollouts_per_step();
  HONE_USER_CHECK(s.prompts_per_step % dp == 0, key_location(c, "grpo.num_prompts_per_step"),
                  ": grpo.num_prompts_per_step = ", s.prompts_per_step, " does not divide over ", dp,
                  " data-parallel ranks (make it a multiple of ", dp, ")");
  if (s.global_batch_size == 0) s.global_batch_size = rollouts;
  HONE_USER_CHECK(rollouts % s.global_batch_size == 0, key_location(c, "train.global_batch_size"),
                  ": train.global_batch_size = ", s.global_batch_size, " does not divide the ", rollouts,
                  " rollouts of a step (grpo.num_prompts_per_step x grpo.num_generations_per_prompt)");
  HONE_USER_CHECK(s.global_batch_size % dp == 0, key_location(c, "train.global_batch_size"),
                  ": train.global_batch_size = ", s.global_batch_size, " does not divide over ", dp,
                  " data-parallel ranks (make it a multiple of ", dp, ")");
  HONE_USER_CHECK(s.max_tokens_per_microbatch >= s.max_total_sequence_length,
                  key_location(c, "train.max_tokens_per_microbatch"), ": train.max_tokens_per_microbatch = ",
                  s.max_tokens_per_microbatch, " is smaller than generation.max_total_sequence_length = ",
                  s.max_total_sequence_length, ": the longest sequence must fit in one micro-batch");
  HONE_USER_CHECK(s.max_new_tokens < s.max_total_sequence_length, key_location(c, "generation.max_new_tokens"),
                  ": generation.max_new_tokens = ", s.max_new_tokens,
                  " leaves no room for a prompt under generation.max_total_sequence_length = ",
                  s.max_total_sequence_length);
}

}  // namespace

RankGrid read_rank_grid(const Config& c, int world_size) {
  check_parallel_supported(c);
  check_tp_fits_model(c);  // a tp that does not divide the model: named where parallel.tp is written
  check_pipeline_fits_model(c);  // the layers' split and generation.tp, likewise
  RankGrid grid(world_size, int(c.get_int("parallel.tp")), int(c.get_int("parallel.pp")),
                int(c.get_int("parallel.cp")), int(c.get_int("parallel.ep")));
  const int tg = deck_generation_tp(c);
  HONE_USER_CHECK(world_size % tg == 0, key_location(c, "generation.tp"), ": generation.tp = ", tg,
                  " does not divide the ", world_size, " ranks: generation replicas are groups of generation.tp "
                  "consecutive ranks");
  return grid;
}

GrpoSettings read_grpo_settings(const Config& c, int dp) {
  GrpoSettings s;
  read_run_keys(c, s);
  read_grpo_keys(c, s);
  read_loss_keys(c, s);
  read_generation_keys(c, s);
  read_train_keys(c, s);
  read_output_keys(c, s);
  check_batch_sizes(c, s, dp);

  // The learning rate decays over the run's optimizer steps (warmup included), as in NeMo-RL / Megatron.
  s.lr.decay_steps = int(s.max_steps * s.optimizer_steps_per_step());
  return s;
}

}  // namespace hone::rl
