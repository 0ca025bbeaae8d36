// Resuming against a changed deck. Every checkpoint holds deck.json, the record of the deck it was written under:
// every key's resolved value (as TOML writes it) and a fingerprint of the inputs the paths name (the JSONL
// dataset's bytes; the tokenizer's files; the model's config.json and safetensors headers). On resume the deck of
// the new start is compared with it, key by key:
//   refused    keys a checkpoint cannot carry, named with where they are set: the model (model.*: the reference
//              model is rebuilt from it), the tokenizer (tokenizer.*), the data and its order (data.*,
//              grpo.num_prompts_per_step, grpo.num_generations_per_prompt: the cursor counts prompts of the seeded
//              order, and samples are keyed by their index in the step), and run.seed (every random stream). For
//              model.path, tokenizer.path and data.path the content decides, not the path: a moved file is
//              accepted, a different file behind the same path is refused.
//   accepted   everything else (learning rate and schedule, max_steps, output and checkpoint folders, logging,
//              loss and generation settings, the parallel layout: checkpoints are whole and independent of
//              tp/dp/pp), listed on resume and in the output file's resume history. run.resume itself is not listed.
// A key the record lacks (a checkpoint of an older hone) counts as its default then. A checkpoint without deck.json
// (older hone) is resumed with a warning that the deck was not compared.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hone {
class Config;
}

namespace hone::rl {

// What a checkpoint records of its deck.
struct DeckRecord {
  std::map<std::string, std::string> values;  // key -> value as TOML writes it (absent: the key had no value)
  std::map<std::string, std::string> inputs;  // "data.path" -> "fnv1a64:<hex>" ("" when the key names nothing)
};

// The record of c (reads the files the input paths name).
DeckRecord record_deck(const Config& c);
std::string deck_record_json(const DeckRecord& r);
// Parses deck.json (any bytes: a damaged file is a UserError naming `path`).
DeckRecord parse_deck_record(const std::string& text, const std::string& path);

// The fingerprint of what an input key names: "" for an empty or absent path, else "fnv1a64:<hex>" of the file
// (data.path), of tokenizer.json and tokenizer_config.json (tokenizer.path), or of config.json and every
// safetensors file's name, size and header (model.path; the weights' bytes are not read).
std::string input_fingerprint(const std::string& key, const std::string& path);
// The input keys: model.path, tokenizer.path, data.path.
const std::vector<std::string>& input_keys();

// Why a changed key cannot be resumed across ("the model", "the data order", ...), or "" when it may change.
std::string resume_refusal_reason(const std::string& key);

// Compares the deck `now` (its record: now_record) with the checkpoint's record. Throws UserError naming every key a
// checkpoint cannot carry (with its old and new value and where the new one is set); returns the accepted changes,
// one "key old -> new" each.
std::vector<std::string> compare_resume_deck(const Config& now, const DeckRecord& now_record,
                                             const DeckRecord& checkpoint, const std::string& checkpoint_path);

}  // namespace hone::rl
