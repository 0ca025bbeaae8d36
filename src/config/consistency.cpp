// Rules that involve more than one key: derived defaults (tokenizer.path from model.path, ...), keys required
// under a condition, and keys that conflict. Checks compare values, not whether a key was written, so a
// resolved deck (Config::to_toml) that spells out every default reads back without new conflicts.
#include <cmath>

#include "config/config.h"
#include "config/deck_errors.h"
#include "runtime/error.h"

namespace hone {

std::string key_location(const Config& c, const std::string& key) {
  const ValueSource& s = c.source(key);
  if (s.kind == ValueSource::Kind::file || s.kind == ValueSource::Kind::override_arg) return s.describe();
  const std::string section = key.substr(0, key.find('.'));
  if (const ValueSource* sec = c.section_source(section)) return sec->describe();
  return c.deck_path().empty() ? std::string("deck") : c.deck_path();
}

namespace {

// "'data.task' = 'jsonl' (default)" / "... (deck.toml:3:1)"
std::string key_and_value(const Config& c, const std::string& key) {
  const std::string v = c.has_value(key) ? deck_value_for_message(c.value(key)) : "(no value)";
  return cat("'", key, "' = ", v, " (", c.source(key).describe(), ")");
}

// The key of a pair that the user wrote, so the error points at the line to change.
const std::string& given_one(const Config& c, const std::string& a, const std::string& b) {
  return (!c.is_set(a) && c.is_set(b)) ? b : a;
}

void conflict(DeckErrors& e, const Config& c, const std::string& a, const std::string& b, const std::string& why) {
  e.add_rule(cat(key_location(c, given_one(c, b, a)), ": conflicting keys ", key_and_value(c, a), " and ",
                      key_and_value(c, b), ": ", why));
}

void missing(DeckErrors& e, const Config& c, const std::string& key, const std::string& because_key,
             const std::string& why) {
  e.add_rule(cat(key_location(c, because_key), ": missing required key '", key, "' (required because ",
                      key_and_value(c, because_key), why, ")"));
}

void fill_derived(Config& c) {
  for (const auto& k : deck_schema()) {
    if (k.derived_from.empty() || c.is_set(k.path) || !c.has_value(k.derived_from)) continue;
    ValueSource src;
    src.kind = ValueSource::Kind::derived;
    src.text = k.derived_from;
    c.set(k.path, c.value(k.derived_from), src);
  }
}

void check_model(const Config& c, DeckErrors& e) {
  const bool from_checkpoint = !c.get_string("model.path").empty();
  for (const auto& k : deck_schema()) {
    if (!k.random_init_only) continue;
    if (from_checkpoint && c.is_set(k.path))
      conflict(e, c, "model.path", k.path, "a checkpoint's shape comes from its config.json; remove the shape key or model.path");
    if (!from_checkpoint && !k.required_when.empty() && !c.has_value(k.path))
      missing(e, c, k.path, "model.path", ": a random-init model needs its shape");
  }
  if (from_checkpoint && c.get_string("model.init") == "pretrained" && c.get_float("model.init_std") != 0.02)
    conflict(e, c, "model.init", "model.init_std", "the weights come from model.path; set model.init = \"random\" for random weights of its shape");
  if (from_checkpoint) return;
  for (const auto& k : deck_schema())  // a missing shape key was said above; the shape's rules need them all
    if (k.random_init_only && !k.required_when.empty() && !c.has_value(k.path)) return;
  const int64_t hidden = c.get_int("model.hidden_size");
  const int64_t heads = c.get_int("model.num_attention_heads");
  const int64_t kv = c.get_int("model.num_key_value_heads");
  const int64_t head_dim = c.get_int("model.head_dim");
  if (head_dim == 0 && hidden % heads != 0)
    return conflict(e, c, "model.hidden_size", "model.num_attention_heads",
                    "hidden_size must be a multiple of num_attention_heads when head_dim = 0");
  if (kv > 0 && heads % kv != 0)
    conflict(e, c, "model.num_attention_heads", "model.num_key_value_heads",
             "num_attention_heads must be a multiple of num_key_value_heads");
  const int64_t d = head_dim > 0 ? head_dim : hidden / heads;
  if (d % 2 != 0)
    conflict(e, c, "model.hidden_size", head_dim > 0 ? "model.head_dim" : "model.num_attention_heads",
             cat("the head width (", d, ") must be even: rotary embeddings rotate pairs of channels"));
}

void check_tokenizer_and_data(const Config& c, DeckErrors& e) {
  if (c.get_string("tokenizer.kind") == "hf" && (!c.has_value("tokenizer.path") || c.get_string("tokenizer.path").empty()))
    missing(e, c, "tokenizer.path", "tokenizer.kind", " and model.path is empty: the tokenizer.json must come from somewhere");
  if (c.get_string("data.task") == "jsonl" && (!c.has_value("data.path") || c.get_string("data.path").empty()))
    missing(e, c, "data.path", "data.task", "");
  if (c.get_int("data.min_digits") > c.get_int("data.max_digits"))
    conflict(e, c, "data.min_digits", "data.max_digits", "min_digits must be <= max_digits");
  if (c.get_int("data.min_length") > c.get_int("data.max_length"))
    conflict(e, c, "data.min_length", "data.max_length", "min_length must be <= max_length");
  // Without a chat format there is no system turn to put it in: it would be dropped without a word.
  if (c.get_string("tokenizer.chat_format") == "none" && !c.get_string("tokenizer.system_prompt").empty())
    conflict(e, c, "tokenizer.chat_format", "tokenizer.system_prompt",
             "a system prompt needs a chat format (auto, chatml or llama3); plain text prompts have no system turn");
  const std::string& task = c.get_string("data.task");
  if (c.get_bool("data.partial_credit") && task != "sort" && task != "reverse")
    conflict(e, c, "data.task", "data.partial_credit", "partial credit is defined for the sort and reverse tasks only; remove the key");
}

// Drawn response lengths (data.response_length) are a benchmark rule of the random_tokens task: they ignore what the
// model writes, and they are exact only when nothing else stops a sample first.
void check_response_length(const Config& c, DeckErrors& e) {
  const std::string& rule = c.get_string("data.response_length");
  const double mean = c.get_float("data.response_length_mean");
  const bool sigma_default = c.get_float("data.response_length_sigma") == 0.8;
  if (rule == "off") {
    const char* why = "the key has nothing to act on without drawn lengths; set data.response_length or remove the key";
    if (mean != 800.0) conflict(e, c, "data.response_length", "data.response_length_mean", why);
    if (!sigma_default) conflict(e, c, "data.response_length", "data.response_length_sigma", why);
    return;
  }
  if (c.get_string("data.task") != "random_tokens")
  {
    e.add_rule(cat(key_location(c, "data.response_length"), ": ", key_and_value(c, "data.response_length"),
                   " is for benchmarks of the random_tokens task only (the drawn lengths ignore what the model "
                   "writes), not for ", key_and_value(c, "data.task"), ": remove data.response_length"));
    return;
  }
  if (rule == "fixed" && !sigma_default)
    conflict(e, c, "data.response_length", "data.response_length_sigma", "fixed lengths have no spread; remove the sigma");
  const int64_t cap = c.get_int("generation.max_new_tokens");
  const bool above = rule == "lognormal" ? mean >= double(cap) : std::llround(mean) > cap;
  if (above) {
    // Both at their defaults: the line to change is the rule's.
    const std::string where = c.is_set("data.response_length_mean") || c.is_set("generation.max_new_tokens")
                                  ? key_location(c, given_one(c, "data.response_length_mean", "generation.max_new_tokens"))
                                  : key_location(c, "data.response_length");
    e.add_rule(cat(where, ": conflicting keys ", key_and_value(c, "data.response_length_mean"), " and ",
                   key_and_value(c, "generation.max_new_tokens"), ": ",
                   rule == "lognormal" ? "the mean of the drawn lengths must be below their cap, "
                                         "generation.max_new_tokens"
                                       : "the fixed length must be at most generation.max_new_tokens"));
  }
  const char* why = "a sample stops exactly at its drawn length only when nothing stops it first";
  if (!c.get_bool("generation.ignore_eos")) conflict(e, c, "data.response_length", "generation.ignore_eos", why);
  if (!c.get_int_list("generation.stop_token_ids").empty())
    conflict(e, c, "data.response_length", "generation.stop_token_ids", why);
  if (!c.get_string_list("generation.stop_strings").empty())
    conflict(e, c, "data.response_length", "generation.stop_strings", why);
}

// Your own reward replaces the built-in one: the math checker's keys then have nothing to act on, nor has the sort
// and reverse checkers' data.partial_credit; neither have the math checker's keys with a synthetic task (scored by
// the task's own checker).
void check_reward(const Config& c, DeckErrors& e) {
  const bool command = !c.get_string("reward.command").empty(), library = !c.get_string("reward.library").empty();
  if (command && library) conflict(e, c, "reward.command", "reward.library", "choose one reward: a program or a plug-in");
  const char* own = command ? "reward.command" : library ? "reward.library" : nullptr;
  const bool math = own == nullptr && c.get_string("data.task") == "jsonl";
  const std::string other = own ? own : "data.task";
  const std::string why = own ? "your own reward replaces the math checker; remove the math checker's key"
                              : "a synthetic task is scored by its own checker, not the math checker; remove the key";
  if (math) return;
  if (own && c.get_bool("data.partial_credit"))
    conflict(e, c, own, "data.partial_credit", "your own reward replaces the task's checker; remove data.partial_credit");
  if (c.get_string("reward.format") != "boxed") conflict(e, c, other, "reward.format", why);
  if (c.get_float("reward.format_reward") != 0.0) conflict(e, c, other, "reward.format_reward", why);
  if (!c.get_bool("reward.fallback_last_number")) conflict(e, c, other, "reward.fallback_last_number", why);
  if (c.get_float("reward.relative_tolerance") != 1e-6) conflict(e, c, other, "reward.relative_tolerance", why);
}

void check_generation(const Config& c, DeckErrors& e) {
  if (c.get_bool("generation.greedy")) {
    const char* why = "greedy decoding does not sample; remove greedy or the sampling filter";
    if (c.get_int("generation.top_k") != 0) conflict(e, c, "generation.greedy", "generation.top_k", why);
    if (c.get_float("generation.top_p") != 1.0) conflict(e, c, "generation.greedy", "generation.top_p", why);
    if (c.get_float("generation.min_p") != 0.0) conflict(e, c, "generation.greedy", "generation.min_p", why);
  }
  const int64_t total = c.get_int("generation.max_total_sequence_length");
  if (c.get_int("generation.max_new_tokens") >= total)
    conflict(e, c, "generation.max_new_tokens", "generation.max_total_sequence_length",
             "max_new_tokens must be < max_total_sequence_length (the prompt needs room)");
  if (c.get_int("data.max_prompt_tokens") >= total)
    conflict(e, c, "data.max_prompt_tokens", "generation.max_total_sequence_length",
             "max_prompt_tokens must be < max_total_sequence_length (the completion needs room)");
  if (c.get_int("model.max_position_embeddings") < total && c.get_string("model.path").empty())
    conflict(e, c, "model.max_position_embeddings", "generation.max_total_sequence_length",
             "the model must cover the longest sequence");
}

void check_grpo_and_train(const Config& c, DeckErrors& e) {
  const int64_t prompts = c.get_int("grpo.num_prompts_per_step");
  const int64_t gens = c.get_int("grpo.num_generations_per_prompt");
  const int64_t gbs = c.get_int("train.global_batch_size");
  if (gbs > 0 && (prompts * gens) % gbs != 0)
    e.add_rule(cat(key_location(c, "train.global_batch_size"), ": conflicting keys ", key_and_value(c, "train.global_batch_size"),
                   " and grpo.num_prompts_per_step * grpo.num_generations_per_prompt = ", prompts, " * ", gens, " = ",
                   prompts * gens, ": global_batch_size must divide the rollouts of a step"));
  if (c.get_bool("grpo.use_leave_one_out_baseline") && gens < 2)
    conflict(e, c, "grpo.use_leave_one_out_baseline", "grpo.num_generations_per_prompt",
             "a leave-one-out baseline needs at least 2 generations per prompt");
  if (c.get_float("loss.is_threshold_low") >= c.get_float("loss.is_threshold_high"))
    conflict(e, c, "loss.is_threshold_low", "loss.is_threshold_high", "is_threshold_low must be < is_threshold_high");
  if (c.get_float("train.min_learning_rate") > c.get_float("train.learning_rate"))
    conflict(e, c, "train.min_learning_rate", "train.learning_rate", "min_learning_rate must be <= learning_rate");
  const std::string& recompute = c.get_string("train.recompute");
  if (c.get_bool("train.activation_recompute") && recompute != "none" && recompute != "full")
    conflict(e, c, "train.activation_recompute", "train.recompute",
             "activation_recompute = true is the older spelling of recompute = \"full\": keep only train.recompute");
  if (c.get_int("train.max_tokens_per_microbatch") < c.get_int("generation.max_total_sequence_length"))
    conflict(e, c, "train.max_tokens_per_microbatch", "generation.max_total_sequence_length",
             "a micro-batch must hold the longest sequence");
}

void check_validation(const Config& c, DeckErrors& e) {
  const bool on = c.get_int("validation.every") > 0 || c.get_bool("validation.at_start");
  if (c.get_float("validation.temperature") == 0.0 && c.get_float("validation.top_p") != 1.0)
    conflict(e, c, "validation.temperature", "validation.top_p", "temperature 0 is greedy decoding, which does not sample");
  if (!on || !c.get_string("validation.path").empty()) return;
  if (c.get_string("data.task") == "jsonl")
    missing(e, c, "validation.path", c.get_int("validation.every") > 0 ? "validation.every" : "validation.at_start",
            " with data.task = 'jsonl': a JSONL dataset's held-out problems come from a file of their own");
  if (c.get_int("validation.max_samples") == 0)
    conflict(e, c, "validation.path", "validation.max_samples",
             "synthetic validation problems are endless: give validation.max_samples > 0 (or a validation.path)");
}

// The overlap moves sequence parallelism's collectives: without it there is nothing to overlap (at tp = 1 both keys
// are ignored).
void check_parallel(const Config& c, DeckErrors& e) {
  if (c.get_int("parallel.tp") > 1 && c.get_bool("parallel.tp_comm_overlap") &&
      !c.get_bool("parallel.sequence_parallel"))
    conflict(e, c, "parallel.sequence_parallel", "parallel.tp_comm_overlap",
             "the overlap moves the sequence-parallel all-gathers and reduce-scatters; turn sequence_parallel on or "
             "tp_comm_overlap off");
  if (c.get_string("generation.experts") == "parallel" && c.get_int("parallel.ep") == 1)
    conflict(e, c, "generation.experts", "parallel.ep",
             "generation splits the experts over the expert-parallel group; set parallel.ep > 1 or "
             "generation.experts = \"auto\"");
}

}  // namespace

void resolve_and_check(Config& c, DeckErrors& e) {
  fill_derived(c);
  for (auto* check : {check_model, check_tokenizer_and_data, check_response_length, check_reward, check_generation,
                      check_grpo_and_train, check_validation, check_parallel})
    e.attempt([&] { check(c, e); });
}

void resolve_and_check(Config& c) {
  DeckErrors e;
  resolve_and_check(c, e);
  e.throw_if_any();
}

}  // namespace hone
