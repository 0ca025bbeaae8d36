// The deck schema itself: one line per key. Adding a key here makes it valid in decks, overridable on the
// command line, echoed in the resolved deck and documented in `hone help deck` and doc/deck.md.
#include "config/schema.h"

#include <cctype>
#include <cstdint>
#include <map>

namespace hone {
namespace {

struct Range {
  std::optional<double> min, max;
  bool min_open = false, max_open = false;
};
Range any() { return {}; }
Range at_least(double lo) { return {lo, std::nullopt, false, false}; }
Range above(double lo) { return {lo, std::nullopt, true, false}; }
Range closed(double lo, double hi) { return {lo, hi, false, false}; }
Range open_closed(double lo, double hi) { return {lo, hi, true, false}; }
Range closed_open(double lo, double hi) { return {lo, hi, false, true}; }
Range open(double lo, double hi) { return {lo, hi, true, true}; }

KeySpec make(const std::string& path, KeyType type, std::optional<DeckValue> def, Range r, const std::string& unit,
             const std::string& desc) {
  KeySpec k;
  k.path = path;
  k.type = type;
  k.default_value = std::move(def);
  k.min = r.min;
  k.max = r.max;
  k.min_open = r.min_open;
  k.max_open = r.max_open;
  k.unit = unit;
  k.description = desc;
  return k;
}
KeySpec b(const std::string& p, bool def, const std::string& desc) { return make(p, KeyType::boolean, def, any(), "", desc); }
KeySpec i(const std::string& p, std::optional<int64_t> def, Range r, const std::string& unit, const std::string& desc) {
  return make(p, KeyType::integer, def ? std::optional<DeckValue>(*def) : std::nullopt, r, unit, desc);
}
KeySpec f(const std::string& p, double def, Range r, const std::string& unit, const std::string& desc) {
  return make(p, KeyType::floating, def, r, unit, desc);
}
KeySpec s(const std::string& p, std::optional<std::string> def, const std::string& desc) {
  return make(p, KeyType::string, def ? std::optional<DeckValue>(*def) : std::nullopt, any(), "", desc);
}
KeySpec e(const std::string& p, std::vector<std::string> allowed, const std::string& def, const std::string& desc) {
  KeySpec k = make(p, KeyType::enumeration, def, any(), "", desc);
  k.allowed = std::move(allowed);
  return k;
}
// An integer key that is read as a 64-bit value (a seed): no 32-bit limit.
KeySpec int64_key(KeySpec k) {
  k.int_limit = INT64_MAX;
  return k;
}
KeySpec with_check(KeySpec k, std::string (*check)(const DeckValue&)) {
  k.check = check;
  return k;
}
KeySpec random_init(KeySpec k) {
  k.random_init_only = true;
  return k;
}
KeySpec required_when(KeySpec k, const std::string& condition) {
  k.required_when = condition;
  return k;
}
KeySpec derived(KeySpec k, const std::string& from) {
  k.derived_from = from;
  return k;
}

// ---- single-value checks beyond a range --------------------------------------------------------------------
std::string check_file_name(const DeckValue& v) {
  const auto& t = std::get<std::string>(v);
  if (t.empty() || t == "." || t == "..") return "not a file name: must be non-empty (letters, digits, '.', '_', '-')";
  for (char c : t)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return "not a file name: use only letters, digits, '.', '_', '-'";
  return "";
}
std::string check_non_empty(const DeckValue& v) {
  return std::get<std::string>(v).empty() ? "empty: must name something" : "";
}
std::string check_operators(const DeckValue& v) {
  const auto& t = std::get<std::string>(v);
  if (t.empty()) return "empty: give one or more of the characters +-*/";
  for (size_t a = 0; a < t.size(); ++a) {
    if (std::string("+-*/").find(t[a]) == std::string::npos) return "not valid: only the characters +-*/ are allowed";
    if (t.find(t[a], a + 1) != std::string::npos) return "not valid: an operator is repeated";
  }
  return "";
}
std::string check_dual_clip(const DeckValue& v) {
  const double c = std::get<double>(v);
  return (c == 0.0 || c > 1.0) ? "" : "out of range: must be 0 (dual clip off) or > 1";
}
std::string check_power_of_two(const DeckValue& v) {
  const int64_t n = std::get<int64_t>(v);
  return (n > 0 && (n & (n - 1)) == 0) ? "" : "not a power of two";
}

std::vector<KeySpec> build_schema() {
  using S = std::vector<std::string>;
  const auto no_int = std::optional<int64_t>();
  return {
      // [run]
      with_check(s("run.name", "hone", "name of the run: the output file is <output.dir>/<run.name>.h5"), check_file_name),
      int64_key(i("run.seed", 1234, at_least(0), "", "seed of every random choice (initialization, data order, sampling)")),
      e("run.device", S{"cpu", "cuda"}, "cpu", "where the model runs: cpu (fp32 reference path) or cuda (one GPU per rank)"),
      i("run.max_steps", 100, at_least(1), "steps", "number of GRPO steps to run"),
      e("run.resume", S{"never", "auto"}, "never", "auto: continue from the newest checkpoint in checkpoint.dir when there is one"),
      b("run.log_all_ranks", false, "every rank logs, with a [rank r] prefix (otherwise rank 0 alone)"),
      e("run.log_level", S{"debug", "info", "warn", "error"}, "info", "least severe log message printed"),
      f("run.progress_every_s", 30.0, at_least(0), "seconds",
        "rank 0 shows the progress of a long phase: a line every this many seconds in a log, one self-updating line on a terminal; 0 = off"),

      // [model]
      s("model.path", "", "Hugging Face checkpoint directory (config.json, *.safetensors) or a GGUF file (converted once into the model cache: doc/models.md); empty: random init from the shape keys below"),
      random_init(e("model.architecture", S{"llama", "qwen2", "qwen3", "qwen3_moe"}, "qwen3", "random init: the transformer family")),
      random_init(i("model.vocab_size", 0, at_least(0), "tokens", "random init: vocabulary size; 0 = the tokenizer's vocabulary size")),
      random_init(required_when(i("model.hidden_size", no_int, at_least(1), "", "random init: model width"), "model.path is empty")),
      random_init(required_when(i("model.intermediate_size", no_int, at_least(1), "", "random init: MLP width"), "model.path is empty")),
      // The layer and expert bounds are hone's limits of any model (model/model_config.cpp's kMaxLayers, kMaxExperts).
      random_init(required_when(i("model.num_layers", no_int, closed(1, 16384), "", "random init: number of transformer layers"), "model.path is empty")),
      random_init(required_when(i("model.num_attention_heads", no_int, at_least(1), "", "random init: number of query heads"), "model.path is empty")),
      random_init(i("model.num_key_value_heads", 0, at_least(0), "", "random init: number of key/value heads (grouped-query attention); 0 = num_attention_heads")),
      random_init(i("model.head_dim", 0, at_least(0), "", "random init: width of one attention head; 0 = hidden_size / num_attention_heads")),
      random_init(derived(i("model.max_position_embeddings", no_int, at_least(1), "tokens", "random init: longest position the model is built for"),
                          "generation.max_total_sequence_length")),
      random_init(f("model.rope_theta", 1000000.0, above(0), "", "random init: rotary position embedding base")),
      random_init(f("model.rms_norm_eps", 1e-6, open(0, 1), "", "random init: epsilon of the RMS norms")),
      random_init(b("model.tie_word_embeddings", false, "random init: the LM head shares the embedding matrix")),
      e("model.init", S{"pretrained", "random"}, "pretrained",
        "pretrained: the weights in model.path; random: random weights (run.seed, model.init_std) of model.path's config.json shape, "
        "so a folder with only config.json will do. Without model.path the model is always random-init from the shape keys"),
      f("model.init_std", 0.02, open_closed(0, 1), "", "random init: standard deviation of the normal weight initialization"),
      random_init(i("model.num_experts", 0, closed(0, 65536), "", "random init, qwen3_moe: experts of each sparse layer (every layer is sparse)")),
      random_init(i("model.num_experts_per_tok", 8, at_least(1), "", "random init, qwen3_moe: experts each token is routed to")),
      random_init(i("model.moe_intermediate_size", 0, at_least(0), "", "random init, qwen3_moe: MLP width of one expert")),
      random_init(b("model.norm_topk_prob", true, "random init, qwen3_moe: the routing weights of a token's experts renormalized to sum to 1")),
      random_init(f("model.router_aux_loss_coef", 0.001, at_least(0), "", "random init, qwen3_moe: the load-balancing loss's weight in the model's config (loss.moe_aux_loss_coef's default)")),

      // [tokenizer]
      e("tokenizer.kind", S{"hf", "chars"}, "hf", "hf: a Hugging Face tokenizer.json; chars: the built-in character tokenizer for synthetic tasks"),
      derived(s("tokenizer.path", std::nullopt, "directory holding tokenizer.json (and tokenizer_config.json)"), "model.path"),
      e("tokenizer.chat_format", S{"auto", "chatml", "llama3", "none"}, "auto",
        "how a prompt is wrapped into a chat turn; auto: the model's own chat template (tokenizer_config.json) when it has one, "
        "else the prompt text as is; chatml/llama3: fixed formats, checked against the tokenizer; none: the prompt text as is"),
      e("tokenizer.enable_thinking", S{"default", "true", "false"}, "default",
        "the enable_thinking variable of the chat template (Qwen3: false closes an empty <think> block in the generation prompt); default: left unset"),
      s("tokenizer.system_prompt", "", "system message put before every prompt (chat formats only); empty: none"),

      // [data]
      e("data.task", S{"jsonl", "arithmetic", "countdown", "sort", "reverse", "random_tokens"}, "jsonl",
        "jsonl: prompts and answers from data.path; otherwise a built-in synthetic task (random_tokens: benchmarks, reward always 0)"),
      required_when(s("data.path", std::nullopt, "JSONL file, one {prompt, answer} object per line"), "data.task = jsonl"),
      with_check(s("data.prompt_key", "prompt", "JSONL field holding the prompt"), check_non_empty),
      with_check(s("data.answer_key", "answer", "JSONL field holding the reference answer"), check_non_empty),
      b("data.skip_bad_lines", false, "skip JSONL lines that do not parse or lack a field (otherwise stop with an error)"),
      b("data.shuffle", true, "shuffle the prompts (seeded by run.seed) before every pass"),
      i("data.max_prompt_tokens", 0, at_least(0), "tokens", "longer prompts are skipped; 0 = limited by generation.max_total_sequence_length"),
      i("data.min_digits", 1, closed(1, 18), "", "arithmetic, countdown: fewest digits of an operand"),
      i("data.max_digits", 2, closed(1, 18), "", "arithmetic, countdown: most digits of an operand"),
      with_check(s("data.operators", "+-", "arithmetic, countdown: operators to draw from (characters of +-*/)"), check_operators),
      i("data.num_operands", 2, closed(2, 8), "", "arithmetic, countdown: numbers in one problem"),
      i("data.min_length", 3, closed(1, 256), "", "sort, reverse: shortest sequence"),
      i("data.max_length", 6, closed(1, 256), "", "sort, reverse: longest sequence"),
      e("data.alphabet", S{"digits", "letters"}, "digits", "sort, reverse: symbols the sequences are made of"),
      b("data.partial_credit", false,
        "sort, reverse: a wrong answer line earns the length of its longest common subsequence with the expected "
        "string over the longer of their two lengths, instead of 0 (only the exact answer earns 1)"),
      i("data.prompt_tokens", 128, closed(1, 1 << 20), "tokens", "random_tokens: token ids per prompt (drawn uniformly from the model's vocabulary)"),
      e("data.response_length", S{"off", "lognormal", "fixed"}, "off",
        "random_tokens, benchmarks only: every sample stops at a length drawn for it (seeded by run.seed, the prompt and "
        "the sample), capped at generation.max_new_tokens: lognormal (a long tail) or fixed (response_length_mean each); "
        "off = the generation's own stop rules"),
      f("data.response_length_mean", 800.0, at_least(1), "tokens",
        "data.response_length: mean of the drawn lengths, the cap included (fixed: every sample's length)"),
      f("data.response_length_sigma", 0.8, open_closed(0, 10), "",
        "data.response_length = lognormal: standard deviation of the log of the length (0.8: a tail like NeMo-RL's 8B "
        "run, mean 795 and longest 4096 tokens)"),

      // [reward]
      s("reward.command", "",
        "your own reward: a program started once per scoring rank (`/bin/sh -c`), scoring batches of JSON lines on its "
        "stdin/stdout (doc/data-and-rewards.md); empty: the built-in reward of the data"),
      s("reward.library", "",
        "your own reward: a shared library with the C ABI of include/hone/reward_plugin.h; empty: none"),
      s("reward.library_options", "", "reward.library: a string handed to its hone_reward_create"),
      f("reward.timeout_s", 600.0, above(0), "seconds", "reward.command: longest wait for one batch's replies; longer ends the run"),
      i("reward.batch_size", 0, at_least(0), "rollouts",
        "reward.command, reward.library: rollouts per batch; 0 = all of a rank's rollouts of a step (or of a dynamic-sampling batch) at once"),
      e("reward.format", S{"boxed", "hashes", "any"}, "boxed",
        "math checker (JSONL data): the answer format that earns reward.format_reward: \\boxed{}, #### X, or any of them and an answer phrase"),
      f("reward.format_reward", 0.0, any(), "", "math checker: added to the reward when the answer is in reward.format, right or wrong"),
      b("reward.fallback_last_number", true,
        "math checker: without a boxed, #### or answer-phrase answer, take the last number of the completion"),
      f("reward.relative_tolerance", 1e-6, closed(0, 1), "", "math checker: relative tolerance between numbers written with decimals"),

      // [grpo]
      i("grpo.num_prompts_per_step", 32, at_least(1), "prompts", "prompts drawn per step (over all data-parallel ranks)"),
      i("grpo.num_generations_per_prompt", 16, at_least(1), "", "completions sampled per prompt (the group of group-relative advantages)"),
      b("grpo.normalize_rewards", true, "divide advantages by the group's reward standard deviation"),
      b("grpo.use_leave_one_out_baseline", false, "baseline of a sample: the mean reward of the other samples of its group"),
      b("grpo.use_dynamic_sampling", false, "drop groups whose rewards are all equal and sample more prompts to refill the batch"),
      i("grpo.dynamic_sampling_max_gen_batches", 10, at_least(1), "", "dynamic sampling: most generation batches per step before giving up"),
      b("grpo.overlong_filtering", false, "truncated completions (no stop before the length limit) get no gradient"),

      // [loss]
      f("loss.ratio_clip_min", 0.2, closed(0, 1), "", "PPO clip: the ratio is kept >= 1 - ratio_clip_min"),
      f("loss.ratio_clip_max", 0.2, at_least(0), "", "PPO clip: the ratio is kept <= 1 + ratio_clip_max"),
      with_check(f("loss.ratio_clip_c", 0.0, at_least(0), "", "dual clip of negative advantages at c; 0 = off, else > 1"), check_dual_clip),
      f("loss.kl_coef", 0.0, at_least(0), "", "weight of the KL penalty to the reference policy; 0 = no reference model"),
      e("loss.kl_type", S{"k1", "k2", "k3"}, "k3", "KL estimator (Schulman's k1, k2, k3)"),
      f("loss.kl_input_clamp", 20.0, above(0), "", "the log-ratio fed to the KL estimator is clamped to +-this"),
      f("loss.kl_output_clamp", 10.0, above(0), "", "the per-token KL value is clamped to +-this"),
      e("loss.aggregation", S{"token", "sequence"}, "token", "token: mean over all tokens of the batch; sequence: mean per sequence, then over sequences"),
      e("loss.importance_sampling", S{"none", "tis", "icepop", "seq_mask"}, "none",
        "correction of train/generation mismatch: truncated IS weights, IcePop token masking, or sequence masking"),
      f("loss.is_threshold_low", 0.5, at_least(0), "", "importance ratios below this are masked (icepop, seq_mask)"),
      f("loss.is_threshold_high", 2.0, above(0), "", "importance ratios above this are truncated (tis) or masked (icepop, seq_mask)"),
      b("loss.skip_prev_logprobs_on_policy", true, "with one optimizer step per GRPO step, use the training forward's logprobs as the previous policy's"),
      f("loss.entropy_coef", 0.0, at_least(0), "", "weight of the entropy bonus"),
      make("loss.moe_aux_loss_coef", KeyType::floating, std::nullopt, at_least(0), "",
           "mixture of experts: weight of the load-balancing loss (transformers' load_balancing_loss_func) in the training loss; unset: the model's router_aux_loss_coef (its config.json, or model.router_aux_loss_coef)"),
      b("loss.router_replay", false, "mixture of experts: the training forward routes every token to the experts generation chose for it (the weights still come from the current router)"),

      // [generation]
      f("generation.temperature", 1.0, above(0), "", "sampling temperature"),
      i("generation.top_k", 0, at_least(0), "tokens", "sample among the k most likely tokens; 0 = off"),
      f("generation.top_p", 1.0, open_closed(0, 1), "", "nucleus sampling: smallest set of tokens with this much probability; 1 = off"),
      f("generation.min_p", 0.0, closed_open(0, 1), "", "drop tokens less likely than min_p times the most likely one; 0 = off"),
      b("generation.greedy", false, "always take the most likely token (no sampling)"),
      i("generation.max_new_tokens", 512, at_least(1), "tokens", "longest completion"),
      i("generation.max_total_sequence_length", 4096, at_least(2), "tokens", "longest prompt plus completion"),
      make("generation.stop_strings", KeyType::string_list, std::vector<std::string>{}, any(), "", "a completion ends after any of these strings"),
      make("generation.stop_token_ids", KeyType::int_list, std::vector<int64_t>{}, at_least(0), "", "a completion ends after any of these tokens (besides the tokenizer's EOS)"),
      b("generation.ignore_eos", false, "keep generating after EOS up to max_new_tokens (for benchmarks)"),
      f("generation.kv_cache_memory_fraction", 0.3, open(0, 1), "", "share of free GPU memory given to the KV cache (when kv_cache_gib = 0)"),
      f("generation.kv_cache_gib", 0.0, at_least(0), "GiB", "KV cache size; 0 = use kv_cache_memory_fraction on a GPU, what the step runs at once on the CPU"),
      with_check(i("generation.kv_block_size", 16, closed(1, 1024), "tokens", "tokens per KV cache page (a power of two)"), check_power_of_two),
      b("generation.cuda_graphs", true, "capture the decode step in CUDA graphs"),
      b("generation.keep_graphs", true,
        "keep the decode CUDA graphs from step to step: between generation phases only the KV cache's and buffers' "
        "physical memory goes back to the device (for training), their addresses stay, so later steps capture "
        "nothing (the cache keeps its first size); false: free and capture again every step"),
      e("generation.experts", S{"auto", "replicated", "parallel"}, "auto",
        "mixture of experts under parallel.ep > 1: replicated = every generating rank holds every expert (gathered "
        "at refit; no rank waits for another), parallel = the experts stay split as in training and the "
        "expert-parallel group's forward passes run in lockstep (rows exchanged at every sparse layer; decode steps "
        "run without CUDA graphs); auto = replicated where a bf16 copy of every expert fits in 80 % of the GPU "
        "memory free once the weights are loaded (the memory check then counts it and names parallel if the run "
        "does not fit), else parallel; the CPU engine replicates"),
      i("generation.tp", 0, at_least(0), "ranks",
        "tensor-parallel size of a generation replica: every group of this many consecutive ranks holds the whole "
        "model for decoding and refit reshards the training weights into it; 0 = parallel.tp (doc/parallelism.md)"),

      // [train]
      f("train.learning_rate", 1e-6, at_least(0), "", "peak learning rate"),
      f("train.min_learning_rate", 0.0, at_least(0), "", "learning rate at the end of a linear or cosine decay"),
      e("train.lr_schedule", S{"constant", "linear", "cosine"}, "constant", "learning rate after warmup: constant, or decaying to min_learning_rate at run.max_steps"),
      i("train.warmup_steps", 0, at_least(0), "steps", "linear warmup from 0 to learning_rate"),
      f("train.weight_decay", 0.01, at_least(0), "", "AdamW decoupled weight decay"),
      f("train.adam_beta1", 0.9, closed_open(0, 1), "", "AdamW first-moment decay"),
      f("train.adam_beta2", 0.999, closed_open(0, 1), "", "AdamW second-moment decay"),
      f("train.adam_eps", 1e-8, above(0), "", "AdamW epsilon"),
      f("train.max_grad_norm", 1.0, at_least(0), "", "clip the global gradient norm to this; 0 = off"),
      i("train.max_nonfinite_updates", 3, at_least(0), "updates", "an optimizer update whose global gradient norm is NaN or Inf is skipped (weights and moments untouched); this many in a row end the run (exit 2); 0 = never end it"),
      i("train.global_batch_size", 0, at_least(0), "sequences", "rollouts per optimizer step; 0 = all rollouts of a step (one optimizer step per GRPO step)"),
      i("train.max_tokens_per_microbatch", 8192, at_least(1), "tokens", "sequences are packed into micro-batches of at most this many tokens"),
      e("train.recompute", S{"none", "selective", "full"}, "none",
        "activation recompute in backward: none keeps every activation (on the GPU also the LM head's logits); "
        "selective keeps the GEMM and attention "
        "outputs and reruns the norms, RoPE and SwiGLU (no extra GEMM or attention); full keeps each layer's input "
        "only and reruns its forward (doc/model-engine.md)"),
      b("train.activation_recompute", false, "the older spelling of train.recompute: true is train.recompute = \"full\""),
      b("train.distributed_optimizer", false, "shard optimizer state and master weights over data-parallel ranks"),
      b("train.grad_reduce_in_fp32", true, "reduce gradients over data-parallel ranks in fp32"),
      b("train.optimizer_offload", false, "keep optimizer state in host memory"),
      b("train.offload_during_generation", false,
        "GPU: while generation runs, the Adam moments and (when generation has a weight copy of its own) the "
        "training weights wait in pinned host memory; the moves are timed"),

      // [parallel]
      i("parallel.tp", 1, at_least(1), "ranks", "tensor-parallel size: must divide the attention heads and the intermediate size (doc/parallelism.md)"),
      b("parallel.sequence_parallel", true,
        "with parallel.tp > 1: norms and residual adds on a 1/tp slice of the tokens (all-gather before and "
        "reduce-scatter after the tensor-parallel GEMMs instead of all-reduces); ignored at tp = 1"),
      b("parallel.tp_comm_overlap", false,
        "with sequence parallelism: move the tensor-parallel layers' all-gathers and reduce-scatters in chunks of "
        "tokens on a communication stream, overlapped with the GEMMs of the chunks already moved (GPU engine; the "
        "CPU engine moves the same chunks one after the other)"),
      i("parallel.tp_comm_overlap_chunks", 4, closed(1, 64), "",
        "with parallel.tp_comm_overlap: the chunks of tokens each overlapped collective is cut into"),
      i("parallel.pp", 1, at_least(1), "ranks",
        "pipeline-parallel size: the layers split over this many stages, 1F1B schedule (doc/parallelism.md)"),
      i("parallel.vpp", 1, at_least(1), "chunks",
        "virtual pipeline stages per rank: interleaved 1F1B over pp x vpp chunks of the layers (needs parallel.pp > 1)"),
      make("parallel.pp_layers", KeyType::int_list, std::vector<int64_t>{}, at_least(0), "layers",
           "layers of each pipeline chunk in model order (pp x vpp entries, summing to the model's layers); empty = "
           "an even split"),
      i("parallel.cp", 1, at_least(1), "ranks",
        "context-parallel size: every packed sequence split over this many ranks for training and logprob"),
      i("parallel.ep", 1, at_least(1), "ranks",
        "expert-parallel size (mixture-of-experts models): experts split over this many of the cp x dp ranks"),
      f("parallel.collective_timeout_s", 600.0, above(0), "seconds",
        "a collective or message that waits longer than this for the other ranks ends the run, naming it (MPI "
        "between ranks, and NCCL unless nccl_timeout_s is given)"),
      derived(make("parallel.nccl_timeout_s", KeyType::floating, std::nullopt, above(0), "seconds",
                   "GPU runs: an NCCL collective that takes longer ends the run; default: parallel.collective_timeout_s"),
              "parallel.collective_timeout_s"),

      // [validation]
      i("validation.every", 0, at_least(0), "steps", "validate every this many steps (after the step's refit); 0 = never"),
      b("validation.at_start", false, "also validate before the first step (step 0)"),
      s("validation.path", "",
        "JSONL file of held-out problems (the data.prompt_key and data.answer_key fields); empty: problems of data.task (a synthetic task) drawn from validation.seed"),
      int64_key(i("validation.seed", 1, at_least(0), "",
                  "seed of the synthetic validation problems and of validation sampling (a stream apart from training's, whatever run.seed is)")),
      i("validation.max_samples", 256, at_least(0), "problems", "problems per validation (the first ones of validation.path); 0 = every problem of validation.path"),
      i("validation.num_generations", 1, at_least(1), "", "completions per problem (k of pass@k)"),
      f("validation.temperature", 0.0, at_least(0), "", "sampling temperature of validation; 0 = greedy (the most likely token)"),
      f("validation.top_p", 1.0, open_closed(0, 1), "", "nucleus sampling of validation (temperature > 0); 1 = off"),

      // [checkpoint]
      with_check(s("checkpoint.dir", "checkpoints", "directory of the checkpoints"), check_non_empty),
      i("checkpoint.every", 0, at_least(0), "steps", "save a checkpoint every this many steps; 0 = only at exit"),
      i("checkpoint.keep", 2, at_least(1), "", "newest checkpoints kept; older ones are deleted"),
      b("checkpoint.overwrite", false,
        "a run that does not resume deletes the checkpoints already in checkpoint.dir (and says which); otherwise it "
        "refuses to start beside them (output.overwrite never deletes checkpoints)"),
      b("checkpoint.save_at_exit", true, "save a checkpoint when the run ends or is stopped by a signal"),
      b("checkpoint.hf_folder", true,
        "also write hf/ in every checkpoint: a ready Hugging Face model folder (config.json, generation_config.json, tokenizer files, "
        "safetensors in checkpoint.dtype) that transformers and vLLM load as is"),
      e("checkpoint.dtype", S{"bfloat16", "float32"}, "bfloat16",
        "dtype of the weights in the checkpoint's hf/ folder (the resume state keeps fp32 master weights whatever this says)"),

      // [output]
      with_check(s("output.dir", "out", "directory of the output file <run.name>.h5"), check_non_empty),
      i("output.sample_every", 10, at_least(0), "steps", "store sample prompts and completions every this many steps; 0 = never"),
      i("output.num_samples", 4, at_least(0), "", "samples stored each time"),
      e("output.rollouts", S{"none", "samples", "all"}, "samples",
        "rollouts kept: none; samples: output.num_samples every output.sample_every steps (/samples); all: those and every rollout "
        "of every step (prompt, completion, reward, sub-scores, lengths, finish reason, logprob sum), compressed, one file per step under /rollouts"),
      b("output.overwrite", false,
        "replace an existing output file (otherwise refuse to start); checkpoints are checkpoint.overwrite's"),

      // [logger]
      b("logger.wandb_enabled", false,
        "feed the run's per-step metrics to Weights & Biases (tools/hone-log, started by hone run on rank 0; needs the "
        "wandb package for logger.python)"),
      b("logger.tensorboard_enabled", false,
        "feed the run's per-step metrics to TensorBoard event files under logger.log_dir (needs the tensorboard package)"),
      b("logger.mlflow_enabled", false,
        "feed the run's per-step metrics to MLflow (needs the mlflow or mlflow-skinny package)"),
      s("logger.log_dir", "",
        "folder of the trackers' local files (TensorBoard events, the MLflow file store, W&B offline runs) and of "
        "hone-log's own log; empty = <output.dir>/<run.name>.logs"),
      s("logger.project", "hone", "W&B project and MLflow experiment name"),
      s("logger.run_name", "", "the run's name in the trackers; empty = run.name"),
      make("logger.tags", KeyType::string_list, std::vector<std::string>{}, any(), "",
           "tags of the tracker run (W&B tags; MLflow tags tag_<i> = value)"),
      e("logger.wandb_mode", S{"offline", "online"}, "offline",
        "offline: W&B writes its run under logger.log_dir/wandb (upload later with `wandb sync`); online: it uploads as "
        "the run goes (needs a W&B login and network on the node)"),
      s("logger.mlflow_tracking_uri", "",
        "MLflow tracking server or store (http://host:5000, sqlite:///mlflow.db); empty = a file store in "
        "logger.log_dir/mlruns"),
      with_check(s("logger.python", "python3",
                   "the Python interpreter that runs tools/hone-log: one whose packages include the trackers (a venv's bin/python)"),
                 check_non_empty),

      // [bench]
      i("bench.prompt_tokens", 128, at_least(1), "tokens", "hone bench-generation: tokens of every random prompt"),
      i("bench.rounds", 3, at_least(1), "", "hone bench-generation: timed rounds after one warm-up round"),
      i("bench.max_num_seqs", 512, at_least(1), "sequences", "hone bench-generation: sequences decoded together at most"),
      i("bench.max_prefill_tokens", 16384, at_least(1), "tokens", "hone bench-generation: tokens per prefill pass"),
      b("bench.shared_prefix", true, "hone bench-generation: share a group's prompt KV blocks (one copy per group in the KV cache)"),
      b("bench.prefix_attention", false,
        "hone bench-generation: decode attention reads a group's shared prompt blocks once for the group (the shared-prefix "
        "path) instead of once per row through the plain path"),
      i("bench.profile_pass", 0, at_least(0), "",
        "hone bench-generation: 0, or the batched pass (prefill or decode step, counted from 1) of the last round after which "
        "a profiler range of two passes opens (cudaProfilerStart/Stop; for ncu --profile-from-start off)"),
  };
}

}  // namespace

std::string KeySpec::section() const { return path.substr(0, path.find('.')); }
std::string KeySpec::name() const { return path.substr(path.find('.') + 1); }

const std::vector<SectionSpec>& deck_sections() {
  static const std::vector<SectionSpec> sections{
      {"run", "the run as a whole"},
      {"model", "the policy model: a Hugging Face checkpoint, or a random-init shape"},
      {"tokenizer", "text to tokens and the chat format"},
      {"data", "the prompts: a JSONL dataset or a built-in synthetic task"},
      {"reward", "scoring the completions: the data's built-in reward (with the math checker's options), or your own"},
      {"grpo", "prompts and generations per step, advantages, dynamic sampling"},
      {"loss", "the clipped policy-gradient loss, KL penalty, importance sampling"},
      {"generation", "sampling, lengths, stop conditions, KV cache"},
      {"train", "optimizer, learning rate schedule, batch sizes, packing, memory"},
      {"parallel", "tensor, pipeline, context and expert parallelism (data parallelism follows from the rank count)"},
      {"validation", "accuracy on held-out problems every few steps, on the generation engine"},
      {"checkpoint", "where and how often checkpoints are saved"},
      {"output", "the HDF5 output file and its samples"},
      {"logger", "experiment trackers (W&B, TensorBoard, MLflow) fed from the output file by tools/hone-log"},
      {"bench", "benchmark settings (hone bench-generation)"},
  };
  return sections;
}

const std::vector<KeySpec>& deck_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

const KeySpec* find_key_spec(const std::string& path) {
  static const std::map<std::string, const KeySpec*> index = [] {
    std::map<std::string, const KeySpec*> m;
    for (const auto& k : deck_schema()) m[k.path] = &k;
    return m;
  }();
  auto it = index.find(path);
  return it == index.end() ? nullptr : it->second;
}

bool is_deck_section(const std::string& name) {
  for (const auto& s : deck_sections())
    if (s.name == name) return true;
  return false;
}

}  // namespace hone
