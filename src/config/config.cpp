// Config: typed access to the resolved deck, and its rendering as TOML (the echo stored with every run).
#include "config/config.h"

#include "runtime/error.h"

namespace hone {

std::string ValueSource::describe() const {
  switch (kind) {
    case Kind::none: return "unset";
    case Kind::default_value: return "default";
    case Kind::derived: return cat("default (", text, ")");
    case Kind::file: return line > 0 ? cat(file, ":", line, ":", column) : file;
    case Kind::override_arg: return cat("override '", text, "'");
  }
  return "?";
}

namespace {

const char* type_word(KeyType t) {
  switch (t) {
    case KeyType::boolean: return "bool";
    case KeyType::integer: return "int";
    case KeyType::floating: return "float";
    case KeyType::string: return "string";
    case KeyType::enumeration: return "enum";
    case KeyType::string_list: return "string list";
    case KeyType::int_list: return "int list";
  }
  return "?";
}

bool value_fits(KeyType t, const DeckValue& v) {
  switch (t) {
    case KeyType::boolean: return std::holds_alternative<bool>(v);
    case KeyType::integer: return std::holds_alternative<int64_t>(v);
    case KeyType::floating: return std::holds_alternative<double>(v);
    case KeyType::string:
    case KeyType::enumeration: return std::holds_alternative<std::string>(v);
    case KeyType::string_list: return std::holds_alternative<std::vector<std::string>>(v);
    case KeyType::int_list: return std::holds_alternative<std::vector<int64_t>>(v);
  }
  return false;
}

}  // namespace

Config Config::defaults() {
  Config c;
  for (const auto& k : deck_schema()) {
    Entry e;
    if (k.default_value) {
      e.value = *k.default_value;
      e.has_value = true;
      e.source.kind = ValueSource::Kind::default_value;
    }
    c.entries_[k.path] = std::move(e);
  }
  return c;
}

void Config::set(const std::string& key, DeckValue value, ValueSource source) {
  const KeySpec* k = find_key_spec(key);
  HONE_CHECK(k, "Config::set: '", key, "' is not a deck key");
  HONE_CHECK(value_fits(k->type, value), "Config::set: value of the wrong type for '", key, "' (", type_word(k->type), ")");
  Entry& e = entries_[key];
  e.value = std::move(value);
  e.has_value = true;
  e.source = std::move(source);
}

const Config::Entry& Config::entry(const std::string& key, KeyType expected, bool need_value) const {
  const KeySpec* k = find_key_spec(key);
  HONE_CHECK(k, "'", key, "' is not a deck key");
  const bool string_like = expected == KeyType::string && k->type == KeyType::enumeration;
  HONE_CHECK(k->type == expected || string_like, "deck key '", key, "' is a ", type_word(k->type), ", asked as a ",
             type_word(expected));
  auto it = entries_.find(key);
  HONE_CHECK(it != entries_.end(), "deck key '", key, "' missing from this Config (not built by load_config/defaults)");
  HONE_CHECK(!need_value || it->second.has_value, "deck key '", key, "' has no value (check has_value first)");
  return it->second;
}

int64_t Config::get_int(const std::string& key) const {
  return std::get<int64_t>(entry(key, KeyType::integer, true).value);
}
double Config::get_float(const std::string& key) const {
  return std::get<double>(entry(key, KeyType::floating, true).value);
}
bool Config::get_bool(const std::string& key) const { return std::get<bool>(entry(key, KeyType::boolean, true).value); }
const std::string& Config::get_string(const std::string& key) const {
  return std::get<std::string>(entry(key, KeyType::string, true).value);
}
const std::vector<std::string>& Config::get_string_list(const std::string& key) const {
  return std::get<std::vector<std::string>>(entry(key, KeyType::string_list, true).value);
}
const std::vector<int64_t>& Config::get_int_list(const std::string& key) const {
  return std::get<std::vector<int64_t>>(entry(key, KeyType::int_list, true).value);
}

const DeckValue& Config::value(const std::string& key) const {
  const KeySpec* k = find_key_spec(key);
  HONE_CHECK(k, "'", key, "' is not a deck key");
  return entry(key, k->type, true).value;
}

bool Config::has_value(const std::string& key) const {
  const KeySpec* k = find_key_spec(key);
  HONE_CHECK(k, "'", key, "' is not a deck key");
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.has_value;
}

bool Config::is_set(const std::string& key) const {
  const auto kind = source(key).kind;
  return kind == ValueSource::Kind::file || kind == ValueSource::Kind::override_arg;
}

const ValueSource& Config::source(const std::string& key) const {
  const KeySpec* k = find_key_spec(key);
  HONE_CHECK(k, "'", key, "' is not a deck key");
  static const ValueSource unset;
  auto it = entries_.find(key);
  return it == entries_.end() ? unset : it->second.source;
}

const ValueSource* Config::section_source(const std::string& section) const {
  auto it = sections_.find(section);
  return it == sections_.end() ? nullptr : &it->second;
}

std::string Config::to_toml() const {
  std::string out = "# hone resolved deck";
  if (!deck_path_.empty()) out += cat(": ", deck_path_);
  for (const auto& o : overrides_) out += cat(" ", o);
  out += "\n# Every key of every section. The comment after a value says where it came from; \"default\" marks\n"
         "# values the deck did not give. Commented-out keys have no value or are not used.\n";
  const bool checkpoint_model = has_value("model.path") && !get_string("model.path").empty();
  std::string section;
  for (const auto& k : deck_schema()) {
    if (k.section() != section) {
      section = k.section();
      out += cat("\n[", section, "]\n");
    }
    auto it = entries_.find(k.path);
    const bool has = it != entries_.end() && it->second.has_value;
    std::string line;
    std::string note;
    if (!has) {
      line = cat("# ", k.name(), " =");
      if (k.random_init_only && checkpoint_model) note = "no value; not used: the shape comes from model.path";
      else if (!k.required_when.empty()) note = cat("no value (required when ", k.required_when, ")");
      else note = "no value";
    } else {
      line = cat(k.name(), " = ", deck_value_to_toml(it->second.value));
      note = it->second.source.describe();
      if (k.random_init_only && checkpoint_model) {
        line = "# " + line;
        note += "; not used: the shape comes from model.path";
      }
    }
    if (line.size() < 40) line.resize(40, ' ');
    out += cat(line, "  # ", note, "\n");
  }
  return out;
}

}  // namespace hone
