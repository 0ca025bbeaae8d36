// Building a GrpoTrainer from the deck: tokenizer, model (loaded or random-init), prompts and reward, stop rules,
// optimizer. Every check of the input happens here, before any work (doc/quickstart.md, "Bad input").
#include <algorithm>
#include <filesystem>

#include "config/config.h"
#include "model/deck_model.h"
#include "model/model_source.h"
#include "parallel/pp_check.h"
#include "parallel/shard_io.h"
#include "parallel/shard_weights.h"
#include "reward/reward_setup.h"
#include "rl/grpo_trainer.h"
#include "rl/host_memory_plan.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace hone::rl {
namespace fs = std::filesystem;

const std::vector<ExtraMetric>& grpo_extra_metrics() {
  static const std::vector<ExtraMetric> m = {
      {"optimizer_steps", "1", "optimizer updates in this step (rollouts / train.global_batch_size)"},
      {"skipped_updates", "1", "of them, skipped for a non-finite gradient norm (weights and moments untouched)"},
      {"samples", "1", "rollouts trained on in this step, over all ranks"},
      {"zero_variance_fraction", "1", "fraction of generated groups whose rewards were all equal (no signal)"},
      {"dynamic_sampling/batches", "1", "generation batches drawn this step (dynamic sampling; 1 otherwise)"},
      {"dynamic_sampling/groups", "1", "groups with signal kept this step (dynamic sampling; all groups otherwise)"},
      {"prompts_too_long", "1", "prompts dropped this step because prompt + max_new_tokens exceeds the length limit"},
      {"is_weight/mean", "1", "mean importance weight between generation and training policy on trained tokens"},
      {"pg_loss", "1", "policy-gradient part of the loss"},
      {"kl_loss", "1", "kl_coef times the KL part of the loss"},
      {"microbatches", "1", "training micro-batches of this step on rank 0"},
      {"pipeline/bubble", "1",
       "pipeline parallelism: idle fraction of a stage's training time under the schedule this step ran (1F1B or "
       "interleaved over its micro-batches; equal chunks, transfers free)"},
      {"pipeline/exchange_fraction", "1",
       "pipeline parallelism: share of the training passes a stage spent in activation and gradient exchanges, "
       "waiting for its neighbours included (the largest rank's)"},
      {"refit/bytes", "bytes",
       "bytes the resharding refit moved between ranks this step (all ranks; 0 when generation runs on the "
       "training layout)"},
      {"time/offload", "s",
       "train.offload_during_generation: seconds moving the idle training state to host memory and back (the "
       "slowest rank's)"},
      {"generation/cuda_graph_captures", "1",
       "GPU: decode CUDA graphs captured in this step (0 after the first step with generation.keep_graphs; the "
       "largest rank's)"},
      {"generation/cuda_graph_replays", "1",
       "GPU: decode steps replayed from CUDA graphs in this step (the largest rank's)"},
      {"generation/tokens_per_s", "tokens/s",
       "generated tokens per second of the generation engine's calls (their own wall time: the slowest replica's)"},
      {"generation/tail_s", "s",
       "seconds from the moment 90 % of a generation call's sequences had stopped to the call's end: the last 10 % "
       "of sequences alone (the slowest replica's, summed over the step's calls)"},
      {"generation/tail_tokens", "tokens", "tokens generated in that window, summed over the replicas"},
      {"generation/mean_running_seqs", "1", "sequences running per decode step, mean over the replicas' decode steps"},
      {"generation/batch_occupancy", "1",
       "generation/mean_running_seqs over the engine's max_num_seqs: how full admission keeps the decode batch"},
      {"generation/expert_idle_passes", "1",
       "generation.experts = parallel: passes a replica ran over none of its own rows while others of its "
       "expert-parallel group still generated, summed over the replicas"},
      {"memory/device_peak", "bytes",
       "GPU: device memory in use at the step's fullest point as the driver counts it (workspaces, CUDA context; the largest rank's)"},
  };
  return m;
}

GrpoTrainer::GrpoTrainer(const Config& c, const ParallelState& parallel)
    : ps_(parallel),
      s_(read_grpo_settings(c, parallel.dp_size())),
      gen_(GenerationLayout::of(parallel.grid(), s_.generation_tp)) {
  build_model(c);
  // Before anything of the model is allocated: a run that cannot fit in host memory ends now, with the numbers (on
  // the GPU the host's part: the initial weights and the samples).
  HostMemoryPlan plan = host_memory_plan(s_, mc_, ps_, model_path_.empty());
  check_host_memory(plan);
  build_data(c);
  build_validation(c, plan);

  // Initial weights (loaded or seeded random init), handed to the engine of run.device, which keeps them in its
  // roles (training/master, generation, reference when the KL term needs it). model.init = "random" draws them
  // for model.path's config.json shape: its folder need hold no weights.
  // Under tensor and pipeline parallelism, this rank's shard of its stage (parallel/shard_layout.h): read as slices
  // of the files, so that no rank holds the whole model; a random init is drawn whole (the same values at every
  // tp and pp) and sliced. Under expert parallelism, this rank's experts only (read from the files by name).
  const bool load = !model_path_.empty() && !random_weights_;
  if (ps_.tp_size() == 1 && ps_.pp_size() == 1 && ps_.ep_size() == 1) {
    initial_ = allocate_weights(mc_);
    if (load)
      load_weights(initial_, mc_, model_path_);
    else
      init_random_weights(initial_, mc_, s_.seed, float(c.get_float("model.init_std")));
  } else {
    const PipelineLayout pipe = deck_pipeline_layout(c, mc_.num_hidden_layers);
    const ShardLayout layout =
        ShardLayout::of(mc_, ps_.tp_size(), ps_.tp_rank(), &pipe, ps_.pp_rank(), ps_.ep_size(), ps_.ep_rank());
    initial_ = allocate_shard_weights(layout, mc_);
    if (load) {
      load_shard_weights(initial_, layout, mc_, model_path_);
    } else {
      ModelWeights whole = allocate_weights(mc_);
      init_random_weights(whole, mc_, s_.seed, float(c.get_float("model.init_std")));
      extract_shard(layout, whole, initial_);
    }
  }
  roles_ = roles::colocated_roles(make_engine(s_, mc_, initial_, ps_));
  timer_ = PhaseTimer([this] { roles_.engine->synchronize(); });  // phase times wait for the device
}

void GrpoTrainer::connect() {
  HONE_CHECK(initial_.flat.defined(), "connect() twice");
  roles_.learner->connect(initial_);
  initial_ = ModelWeights();
}

GrpoTrainer::~GrpoTrainer() = default;

void GrpoTrainer::build_model(const Config& c) {
  // Tokenizer first: a random-init vocabulary of 0 takes its size.
  const std::string kind = c.get_string("tokenizer.kind");
  model_path_ = model_folder(c.get_string("model.path"));
  random_weights_ = c.get_string("model.init") == "random";
  std::string tok_path = c.has_value("tokenizer.path") ? model_folder(c.get_string("tokenizer.path")) : "";
  if (kind == "hf") {
    HONE_USER_CHECK(!tok_path.empty(), "tokenizer.path is empty: tokenizer.kind = \"hf\" needs a folder holding tokenizer.json (or a model.path)");
    HONE_USER_CHECK(fs::is_directory(tok_path), "tokenizer.path = \"", tok_path, "\": no such folder");
    HONE_USER_CHECK(fs::exists(fs::path(tok_path) / "tokenizer.json"), "tokenizer.path = \"", tok_path,
                    "\": no tokenizer.json in it");
  }
  tok_ = load_tokenizer(kind, tok_path);
  if (kind == "hf") tokenizer_dir_ = tok_path;
  chat_ = ChatSetup(c.get_string("tokenizer.chat_format"), *tok_, kind == "hf" ? tok_path : "");
  system_prompt_ = c.get_string("tokenizer.system_prompt");
  if (!system_prompt_.empty() && !chat_.is_chat())
    log_warn("tokenizer.system_prompt is set but tokenizer.chat_format = \"", c.get_string("tokenizer.chat_format"),
             "\" found no chat format for this tokenizer (", chat_.describe(),
             "): prompts are plain text and the system prompt is not used");
  if (const std::string thinking = c.get_string("tokenizer.enable_thinking"); thinking != "default")
    chat_options_.enable_thinking = thinking == "true";

  if (!model_path_.empty()) {
    HONE_USER_CHECK(fs::is_directory(model_path_), "model.path = \"", model_path_, "\": no such folder");
    HONE_USER_CHECK(fs::exists(fs::path(model_path_) / "config.json"), "model.path = \"", model_path_,
                    "\": no config.json in it (a Hugging Face checkpoint folder is expected)");
    mc_ = load_model_config(model_path_);
    const fs::path dir(model_path_);
    HONE_USER_CHECK(random_weights_ || fs::exists(dir / "model.safetensors") ||
                        fs::exists(dir / "model.safetensors.index.json"),
                    "model.path = \"", model_path_, "\": no weights in it (model.safetensors or model.safetensors.index.json); "
                    "set model.init = \"random\" to start from random weights of its config.json");
  } else {
    mc_ = random_init_model_config(c);
    if (mc_.vocab_size == 0) mc_.vocab_size = tok_->vocab_size();
    mc_.torch_dtype = "float32";
    mc_.validate();
  }
  // The mixture-of-experts keys: the load-balancing loss's weight defaults to the model's, replay needs experts.
  if (s_.moe_aux_loss_coef < 0) s_.moe_aux_loss_coef = mc_.is_moe() ? mc_.router_aux_loss_coef : 0.0;
  HONE_USER_CHECK(!s_.router_replay || mc_.is_moe(), "loss.router_replay = true: the model (",
                  architecture_hf_name(mc_.arch), ") has no experts to replay");
  HONE_USER_CHECK(ps_.ep_size() == 1 || mc_.is_moe(), "parallel.ep = ", ps_.ep_size(), ": the model (",
                  architecture_hf_name(mc_.arch), ") has no experts to split (expert parallelism needs a mixture of "
                  "experts such as Qwen3MoeForCausalLM); set parallel.ep = 1");
  HONE_USER_CHECK(mc_.vocab_size >= tok_->vocab_size(), "the model's vocabulary (", mc_.vocab_size,
                  " tokens) is smaller than the tokenizer's (", tok_->vocab_size(), ")");
  HONE_USER_CHECK(mc_.max_position_embeddings >= s_.max_total_sequence_length, "the model is built for ",
                  mc_.max_position_embeddings, " positions (max_position_embeddings) but generation.max_total_sequence_length = ",
                  s_.max_total_sequence_length, ": lower it to at most ", mc_.max_position_embeddings);

  // Stop rules: EOS ids of the tokenizer and the model, the chat format's end of turn, the deck's extra ids.
  auto add_id = [&](int64_t id) {
    if (id < 0) return;
    for (int32_t x : stop_.stop_token_ids)
      if (x == id) return;
    stop_.stop_token_ids.push_back(int32_t(id));
  };
  if (!s_.ignore_eos) {
    add_id(tok_->eos_id());
    for (int id : mc_.eos_token_ids) add_id(id);
    if (!chat_.end_of_turn().empty()) add_id(tok_->token_to_id(chat_.end_of_turn()));
  }
  for (int64_t id : s_.stop_token_ids) {
    HONE_USER_CHECK(id < mc_.vocab_size, "generation.stop_token_ids: ", id, " is outside the vocabulary (", mc_.vocab_size, " tokens)");
    add_id(id);
  }
  stop_.stop_strings = s_.stop_strings;
  stop_.max_new_tokens = s_.max_new_tokens;
}

std::vector<int32_t> GrpoTrainer::encode_prompt(const data::Prompt& p) const {
  if (!p.token_ids.empty()) return p.token_ids;
  std::vector<ChatMessage> msgs;
  if (chat_.is_chat() && !system_prompt_.empty() && (p.messages.empty() || p.messages[0].role != "system"))
    msgs.push_back({"system", system_prompt_});
  for (const auto& m : p.messages) msgs.push_back({m.role, m.content});
  // A prompt given as plain text only (synthetic tasks) is one user message, after the system prompt if any.
  if (p.messages.empty()) msgs.push_back({"user", p.text});
  return tok_->encode(chat_.render(msgs, chat_options_), /*add_special=*/false);
}

void GrpoTrainer::build_data(const Config& c) {
  task_ = task::make_task(task_options(c), [this](const data::Prompt& p) { return int64_t(encode_prompt(p).size()); });
  data::ResponseLengthOptions lengths;
  lengths.rule = c.get_string("data.response_length");
  lengths.mean = c.get_float("data.response_length_mean");
  lengths.sigma = c.get_float("data.response_length_sigma");
  lengths.cap = s_.max_new_tokens;
  lengths.seed = s_.seed;
  lengths_ = data::ResponseLengths(lengths);

  // The step's reward: started (a program) or loaded (a plug-in) on the ranks that score: the first rank of each
  // generation replica, where the rollouts are scored (rl/grpo_trainer_reward.cpp).
  const reward::RewardOptions ro = reward::RewardOptions::from_config(c);
  reward_batch_size_ = ro.batch_size;
  if (gen_.tg > 1 && !gen_.same_as_training) gen_group_ = std::make_unique<GenerationGroup>(ps_.grid(), gen_.tg);
  if (gen_.rank_in_replica(ps_.world_rank()) == 0) reward_ = make_reward(ro, task_.checker, ps_.world_rank());
}

task::TaskOptions GrpoTrainer::task_options(const Config& c) const {
  task::TaskOptions o;
  const std::string task = c.get_string("data.task");
  if (task == "jsonl") {
    o.synthetic.task.clear();  // a JSONL dataset, no synthetic task
    o.dataset.path = c.has_value("data.path") ? c.get_string("data.path") : "";
    HONE_USER_CHECK(!o.dataset.path.empty(), "data.path is empty: data.task = \"jsonl\" needs a JSONL file of prompts");
    std::error_code ec;
    HONE_USER_CHECK(fs::is_regular_file(o.dataset.path, ec), key_location(c, "data.path"), ": data.path = \"",
                    o.dataset.path, "\": ",
                    fs::is_directory(o.dataset.path, ec) ? "a folder, not a JSONL file" : "no such file");
    o.dataset.prompt_key = c.get_string("data.prompt_key");
    o.dataset.answer_key = c.get_string("data.answer_key");
    o.dataset.skip_bad_lines = c.get_bool("data.skip_bad_lines");
    o.dataset.shuffle = c.get_bool("data.shuffle");
    // Prompts that leave no room for max_new_tokens are dropped when the dataset is scanned (and counted).
    const int64_t room = s_.max_total_sequence_length - s_.max_new_tokens;
    const int64_t given = c.get_int("data.max_prompt_tokens");
    o.dataset.max_prompt_tokens = given > 0 ? std::min(given, room) : room;
    const std::string lengths = cat("generation.max_total_sequence_length = ", s_.max_total_sequence_length,
                                    " less generation.max_new_tokens = ", s_.max_new_tokens);
    if (given == 0)
      o.dataset.max_prompt_tokens_origin = cat("data.max_prompt_tokens is 0 (unset), so the room ", lengths,
                                               " leaves");
    else if (given > room)
      o.dataset.max_prompt_tokens_origin = cat("data.max_prompt_tokens = ", given, " is cut to the room ", lengths,
                                               " leaves");
    o.dataset.seed = s_.seed;
  } else {
    o.synthetic.task = task;
    o.synthetic.min_digits = int(c.get_int("data.min_digits"));
    o.synthetic.max_digits = int(c.get_int("data.max_digits"));
    o.synthetic.operators = c.get_string("data.operators");
    o.synthetic.num_operands = int(c.get_int("data.num_operands"));
    o.synthetic.min_length = int(c.get_int("data.min_length"));
    o.synthetic.max_length = int(c.get_int("data.max_length"));
    o.synthetic.alphabet = c.get_string("data.alphabet");
    o.synthetic.partial_credit = c.get_bool("data.partial_credit");
    o.synthetic.prompt_tokens = int(c.get_int("data.prompt_tokens"));
    o.synthetic.vocab_size = mc_.vocab_size;
    o.synthetic.seed = s_.seed;
  }
  o.math = reward::math_reward_options(c);
  return o;
}

std::string GrpoTrainer::describe() const {
  return cat(model_path_.empty() ? std::string("random-init ")
             : random_weights_    ? "random-init model of " + model_path_ + "/config.json, "
                                  : "model " + model_path_ + ", ",
             architecture_hf_name(mc_.arch), " with ", mc_.num_parameters(), " parameters (", mc_.num_hidden_layers,
             " layers, hidden ", mc_.hidden_size, ", vocabulary ", mc_.vocab_size, ") on ", roles_.engine->describe(), "; prompts: ",
             task_.prompts->describe(), "; chat format: ", chat_.describe(), "; reward: ", reward_ ? reward_->name() : task_.checker->name(), "; ", ps_.dp_size(), " data-parallel rank",
             ps_.dp_size() > 1 ? "s" : "");
}

}  // namespace hone::rl
