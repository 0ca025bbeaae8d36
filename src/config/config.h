// The resolved input deck: every schema key with its value and where the value came from (deck file line,
// command-line override, default). Built by load_config(); read by the rest of hone through typed accessors:
//
//   hone::Config c = hone::load_config("input/demo.toml", {"run.max_steps=3"});   // throws UserError (exit 2)
//   int64_t g = c.get_int("grpo.num_generations_per_prompt");
//
// Asking for a key that is not in the schema, or with the wrong type, is a programmer error (hone::Error).
// Plain header: no TOML++ here (config/deck_loader.cpp does the parsing).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/schema.h"

namespace hone {

// Where a value came from.
struct ValueSource {
  enum class Kind { none, default_value, derived, file, override_arg };
  Kind kind = Kind::none;
  std::string file;      // file: the deck path as given
  int line = 0, column = 0;
  std::string text;      // override_arg: the argument "run.max_steps=3"; derived: the key it came from

  // "input/demo.toml:12:5", "override 'run.max_steps=3'", "default", "default (model.path)", "unset".
  std::string describe() const;
};

class Config {
 public:
  // Typed accessors. get_string also reads enums (the value's name). Throws hone::Error for a key not in the
  // schema, a type mismatch, or a key that has no value (see has_value: optional keys without default).
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;
  const std::vector<int64_t>& get_int_list(const std::string& key) const;

  bool has_value(const std::string& key) const;  // false only for optional keys with no default that were not given
  bool is_set(const std::string& key) const;     // given in the deck or by an override
  const ValueSource& source(const std::string& key) const;
  const DeckValue& value(const std::string& key) const;

  // The deck file this config was read from ("" when built from defaults only).
  const std::string& deck_path() const { return deck_path_; }
  // The overrides it was given, in order.
  const std::vector<std::string>& overrides() const { return overrides_; }

  // The complete resolved deck as TOML: every section and key in schema order, given values as plain
  // assignments, defaults marked `# default`, keys without a value (and random-init keys when model.path is set)
  // commented out. Parsing this text gives back the same values. `hone run` echoes it and stores it in the output.
  std::string to_toml() const;

  // Building (used by the loader; also handy in tests): set a value of the right type for key.
  void set(const std::string& key, DeckValue value, ValueSource source);
  void set_deck_path(const std::string& path) { deck_path_ = path; }
  void add_override(const std::string& arg) { overrides_.push_back(arg); }
  // Where a [section] header sits in the deck file (for errors about keys missing from it).
  void set_section_source(const std::string& section, ValueSource source) { sections_[section] = std::move(source); }
  const ValueSource* section_source(const std::string& section) const;

  // Every key at its default (keys without default left without a value).
  static Config defaults();

 private:
  struct Entry {
    DeckValue value;
    bool has_value = false;
    ValueSource source;
  };
  const Entry& entry(const std::string& key, KeyType expected, bool need_value) const;

  std::map<std::string, Entry> entries_;
  std::map<std::string, ValueSource> sections_;
  std::string deck_path_;
  std::vector<std::string> overrides_;
};

// Reads the deck file, applies the overrides ("key=value", typed by the schema), fills derived defaults and checks
// every key and the combinations of keys. Throws hone::UserError with one line "<where>: <what>" on bad input.
Config load_config(const std::string& deck_path, const std::vector<std::string>& overrides = {});
// The same from deck text in memory; `name` stands for the file name in messages and sources.
Config load_config_from_string(const std::string& toml_text, const std::string& name,
                               const std::vector<std::string>& overrides = {});

// Parses one override argument's value for a key (exposed for tests): "16" -> 16, "[1,2]" -> {1,2}, ...
// Throws UserError "override '<arg>': ..." when the text does not fit the key's type.
DeckValue parse_override_value(const KeySpec& key, const std::string& text, const std::string& arg);

// Checks the combinations of keys (conflicts, conditional requirements) and fills derived defaults.
// Called by load_config; throws UserError naming where the offending value came from.
void resolve_and_check(Config& c);
// The same, every broken rule into `errors` (config/deck_errors.h) instead of the first one thrown.
class DeckErrors;
void resolve_and_check(Config& c, DeckErrors& errors);

// Where an error about `key` points: its line in the deck ("deck.toml:12:1") or its override ("override
// 'parallel.tp=3'"); for a default, the key's [section] header when the deck has one, else the deck file.
std::string key_location(const Config& c, const std::string& key);

// The schema key nearest to an unknown key (edit distance, also across sections), or "" when none is close.
std::string suggest_key(const std::string& unknown);
std::string suggest_section(const std::string& unknown);

}  // namespace hone
