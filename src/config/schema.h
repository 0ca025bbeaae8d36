// The input deck's schema: every key a deck may contain, with its type, default, range, unit and meaning.
// It is the single source of truth for validation (config/deck_loader.cpp), the resolved echo (Config::to_toml),
// `hone help deck` and doc/deck.md. Plain header: no TOML++ here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hone {

enum class KeyType { boolean, integer, floating, string, enumeration, string_list, int_list };

// One deck value. Enums are stored as their string; floats as double; integers as int64_t.
using DeckValue = std::variant<bool, int64_t, double, std::string, std::vector<std::string>, std::vector<int64_t>>;

struct KeySpec {
  std::string path;  // full key path, "grpo.num_generations_per_prompt"
  KeyType type = KeyType::string;
  std::optional<DeckValue> default_value;  // nullopt: no default (absent unless given, or required_when says)
  std::string derived_from;                // when not given, the value of this other key (e.g. "model.path")
  std::string required_when;               // human-readable condition, "data.task = jsonl" (checked in consistency.cpp)
  std::vector<std::string> allowed;        // enum values
  std::optional<double> min, max;          // numeric range (for lists: of each element)
  // Integers: the largest value the code that reads the key can hold (most keys end up in an int); checked
  // exactly, as an int64, on top of min/max, so that no value wraps on its way to its target type.
  int64_t int_limit = 2147483647;
  bool min_open = false, max_open = false; // exclusive bounds
  std::string unit;                        // "tokens", "seconds", "GiB", "steps"; empty when none applies
  std::string description;                 // one line
  bool random_init_only = false;           // a random-init shape key: meaningless (and refused) with model.path
  // Extra check of a single value beyond type and range; returns "" when fine, else what is wrong
  // (completes "'key' = value is ...": e.g. "out of range: must be 0 (off) or > 1").
  std::string (*check)(const DeckValue&) = nullptr;

  std::string section() const;  // "grpo"
  std::string name() const;     // "num_generations_per_prompt"
};

struct SectionSpec {
  std::string name;         // "grpo"
  std::string description;  // one line
};

const std::vector<SectionSpec>& deck_sections();  // in deck order
const std::vector<KeySpec>& deck_schema();        // in deck order, grouped by section
const KeySpec* find_key_spec(const std::string& path);  // nullptr when not a deck key
bool is_deck_section(const std::string& name);

// "an integer", "a float", ... as used in "expected an integer".
std::string key_type_article_name(KeyType t);
// "int", "float", "bool", "string", "enum", "array of strings", "array of ints": the reference's type column.
std::string key_type_short_name(KeyType t);

// A value written the way TOML writes it: 3, 0.5, true, "text", ["a", "b"], [1, 2]. Floats round-trip exactly.
std::string deck_value_to_toml(const DeckValue& v);
// A value for messages: strings in single quotes ('cpu'), the rest as in TOML.
std::string deck_value_for_message(const DeckValue& v);
// The range of a numeric key in words: ">= 1", "in (0, 1]", ""; for messages and the reference.
std::string key_range_text(const KeySpec& k);
// Checks a value of the right type against the key's range, allowed values and extra check.
// Returns "" when fine, else the full complaint without location: "'run.max_steps' = 0 is out of range: must be >= 1".
std::string check_deck_value(const KeySpec& k, const DeckValue& v);

}  // namespace hone
