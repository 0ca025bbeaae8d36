// Reading a deck: TOML++ parses the file; every key is looked up in the schema, converted to its type and
// checked; command-line overrides are applied on top; then the combinations of keys are checked
// (config/consistency.cpp). Every error is one line "<file>:<line>:<column>: <what>" or "override '<arg>': <what>".
// TOML++ stays inside this file: config.h is a plain header.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "config/toml.h"

#include "config/config.h"
#include "config/deck_errors.h"
#include "config/toml_guard.h"
#include "runtime/activity.h"
#include "runtime/error.h"
#include "runtime/one_line.h"

namespace hone {
namespace {

std::string position_text(const std::string& file, const toml::source_position& p) {
  return p.line > 0 ? cat(file, ":", p.line, ":", p.column) : file;
}

std::string found_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

std::string did_you_mean(const std::string& suggestion, bool section) {
  if (suggestion.empty()) return "";
  return section ? cat(" (did you mean '[", suggestion, "]'?)") : cat(" (did you mean '", suggestion, "'?)");
}

std::string unknown_key_message(const std::string& path) {
  return cat("unknown key '", path, "'", did_you_mean(suggest_key(path), false));
}

// Whether the table was opened by a [header] line (rather than made by a dotted key `foo.bar = 1`): TOML++ does
// not say, but the deck text does.
bool opened_by_header(const std::string& text, const toml::node& table) {
  const auto line = table.source().begin.line;
  if (line == 0 || !table.is_table() || table.as_table()->is_inline()) return false;
  size_t pos = 0;
  for (toml::source_index l = 1; l < line && pos != std::string::npos; ++l) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos) return false;
  const size_t first = text.find_first_not_of(" \t", pos);
  return first != std::string::npos && text[first] == '[';
}

// Where a [table] header starts (its '['), falling back to the key for tables made implicitly by dotted keys.
toml::source_position header_position(const toml::key& key, const toml::node& table) {
  const auto& p = table.source().begin;
  return p.line > 0 ? p : key.source().begin;
}

// A deck problem found while walking the file; all are reported, in the order of the file.
struct Problem {
  toml::source_position where;
  std::string message;
  std::string key = {};  // the key refused, when one is
};

// Converts a TOML node to the key's type. On a type mismatch returns false and sets `problem`
// (for arrays, the position and index of the offending element).
bool convert(const KeySpec& k, const toml::node& n, DeckValue* out, Problem* problem) {
  auto mismatch = [&](const toml::node& bad, const std::string& path, KeyType expected) {
    problem->where = bad.source().begin;
    problem->message = cat("wrong type for '", path, "': expected ", key_type_article_name(expected), ", found ", found_name(bad));
    return false;
  };
  switch (k.type) {
    case KeyType::boolean:
      if (!n.is_boolean()) return mismatch(n, k.path, k.type);
      *out = n.as_boolean()->get();
      return true;
    case KeyType::integer:
      if (!n.is_integer()) return mismatch(n, k.path, k.type);
      *out = n.as_integer()->get();
      return true;
    case KeyType::floating:
      if (n.is_floating_point()) *out = n.as_floating_point()->get();
      else if (n.is_integer()) *out = static_cast<double>(n.as_integer()->get());
      else return mismatch(n, k.path, k.type);
      return true;
    case KeyType::string:
    case KeyType::enumeration:
      if (!n.is_string()) return mismatch(n, k.path, k.type);
      *out = n.as_string()->get();
      return true;
    case KeyType::string_list:
    case KeyType::int_list: {
      if (!n.is_array()) return mismatch(n, k.path, k.type);
      const bool strings = k.type == KeyType::string_list;
      std::vector<std::string> ls;
      std::vector<int64_t> li;
      const auto& arr = *n.as_array();
      for (size_t a = 0; a < arr.size(); ++a) {
        const toml::node& el = arr[a];
        const std::string path = cat(k.path, "[", a, "]");
        if (strings) {
          if (!el.is_string()) return mismatch(el, path, KeyType::string);
          ls.push_back(el.as_string()->get());
        } else {
          if (!el.is_integer()) return mismatch(el, path, KeyType::integer);
          li.push_back(el.as_integer()->get());
        }
      }
      if (strings) *out = std::move(ls);
      else *out = std::move(li);
      return true;
    }
  }
  return false;
}

void read_section(const std::string& text, const std::string& file, const std::string& section, const toml::table& table, Config& c,
                  std::vector<Problem>& problems) {
  for (auto&& [key, node] : table) {
    const std::string path = cat(section, ".", key.str());
    const KeySpec* k = find_key_spec(path);
    if (!k) {
      if (opened_by_header(text, node))
        problems.push_back({header_position(key, node), cat("unknown section '[", path, "]'", did_you_mean(suggest_key(path), false))});
      else
        problems.push_back({key.source().begin, unknown_key_message(path)});
      continue;
    }
    DeckValue v;
    Problem p;
    if (!convert(*k, node, &v, &p)) {
      p.key = path;
      problems.push_back(p);
      continue;
    }
    const std::string bad = check_deck_value(*k, v);
    if (!bad.empty()) {
      problems.push_back({node.source().begin, bad, path});
      continue;
    }
    ValueSource src;
    src.kind = ValueSource::Kind::file;
    src.file = file;
    src.line = static_cast<int>(key.source().begin.line);
    src.column = static_cast<int>(key.source().begin.column);
    c.set(path, std::move(v), std::move(src));
  }
}

// Every problem of the file, in the order of the file, into `errors` (the keys in error keep their defaults).
void read_deck(const std::string& text, const std::string& file, Config& c, DeckErrors& errors) {
  const std::string problem = toml_guard_problem(text);
  errors.syntax = true;  // until the file has parsed
  if (!problem.empty()) throw UserError(cat(file, ":", problem));
  toml::table root;
  try {
    root = toml::parse(text, file);
    errors.syntax = false;
  } catch (const toml::parse_error& e) {
    std::string what(e.description());
    std::replace(what.begin(), what.end(), '\n', ' ');
    throw UserError(cat(position_text(file, e.source().begin), ": TOML syntax error: ", what));
  }
  std::vector<Problem> problems;
  for (auto&& [key, node] : root) {
    const std::string name(key.str());
    if (!is_deck_section(name)) {
      // Any table at the top (a [header], a dotted key `grpx.a = 1`, an inline table) names a section.
      if (node.is_table())
        problems.push_back({header_position(key, node), cat("unknown section '[", name, "]'", did_you_mean(suggest_section(name), true))});
      else
        problems.push_back({key.source().begin, unknown_key_message(name)});
      continue;
    }
    if (!node.is_table()) {
      problems.push_back({key.source().begin, cat("wrong type for section '", name, "': expected a table [", name, "], found ",
                                                  node.is_array_of_tables() ? "an array of tables" : found_name(node))});
      continue;
    }
    ValueSource sec;
    sec.kind = ValueSource::Kind::file;
    sec.file = file;
    sec.line = static_cast<int>(header_position(key, node).line);
    sec.column = static_cast<int>(header_position(key, node).column);
    c.set_section_source(name, sec);
    read_section(text, file, name, *node.as_table(), c, problems);
  }
  std::stable_sort(problems.begin(), problems.end(), [](const Problem& a, const Problem& b) {
    return std::make_pair(a.where.line, a.where.column) < std::make_pair(b.where.line, b.where.column);
  });
  for (const Problem& p : problems) {
    const std::string line = cat(position_text(file, p.where), ": ", p.message);
    if (p.key.empty())
      errors.add(line);
    else
      errors.add_for_key(p.key, line);
  }
}

// Parses `text` as the value of a one-key TOML document "v = <text>"; nullopt when it is not one TOML value.
std::optional<toml::table> parse_toml_value(const std::string& text) {
  if (text.find_first_of("\n\r") != std::string::npos) return std::nullopt;
  if (!toml_guard_problem(text).empty()) return std::nullopt;
  try {
    toml::table t = toml::parse("v = " + text);
    if (t.size() != 1 || !t.contains("v")) return std::nullopt;
    return t;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

std::string read_file_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(cat("cannot read deck '", path, "': it is a directory"));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(cat("cannot read deck '", path, "': ", std::strerror(errno)));
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad()) throw UserError(cat("cannot read deck '", path, "': read error"));
  return os.str();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

void apply_override(const std::string& arg, Config& c) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos)
    throw UserError(cat("override '", arg, "': expected key=value (e.g. run.max_steps=3)"));
  const std::string key = trim(arg.substr(0, eq));
  const KeySpec* k = find_key_spec(key);
  if (!k) throw UserError(cat("override '", arg, "': ", unknown_key_message(key)));
  DeckValue v = parse_override_value(*k, trim(arg.substr(eq + 1)), arg);
  const std::string bad = check_deck_value(*k, v);
  if (!bad.empty()) throw UserError(cat("override '", arg, "': ", bad));
  ValueSource src;
  src.kind = ValueSource::Kind::override_arg;
  src.text = arg;
  c.set(key, std::move(v), std::move(src));
  c.add_override(arg);
}

}  // namespace

DeckValue parse_override_value(const KeySpec& k, const std::string& text, const std::string& arg) {
  auto fail = [&](const std::string& expected) -> UserError {
    return UserError(cat("override '", arg, "': expected ", expected));
  };
  const auto doc = parse_toml_value(text);
  const toml::node* n = doc ? doc->get("v") : nullptr;
  switch (k.type) {
    case KeyType::boolean:
      if (n && n->is_boolean()) return n->as_boolean()->get();
      throw fail("true or false");
    case KeyType::integer:
      if (n && n->is_integer()) return n->as_integer()->get();
      throw fail("an integer");
    case KeyType::floating: {
      if (n && n->is_floating_point()) return n->as_floating_point()->get();
      if (n && n->is_integer()) return static_cast<double>(n->as_integer()->get());
      // Also what strtod reads but TOML does not (".5", "5."): a shell user types these.
      char* end = nullptr;
      errno = 0;
      const double x = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
      if (!text.empty() && end && *end == '\0' && errno == 0 && text.find_first_of("xXpP") == std::string::npos) return x;
      throw fail("a number");
    }
    case KeyType::string:
    case KeyType::enumeration:
      // Quoted text is a TOML string (with escapes); anything else is taken as it is.
      if (!text.empty() && (text.front() == '"' || text.front() == '\'')) {
        if (n && n->is_string()) return n->as_string()->get();
        throw fail("a string: the quotes do not match");
      }
      return text;
    case KeyType::string_list:
    case KeyType::int_list: {
      const bool strings = k.type == KeyType::string_list;
      const std::string expected = strings ? "an array of strings like [\"a\", \"b\"]" : "an array of integers like [1, 2]";
      if (!n || !n->is_array()) throw fail(expected);
      std::vector<std::string> ls;
      std::vector<int64_t> li;
      for (const auto& el : *n->as_array()) {
        if (strings && el.is_string()) ls.push_back(el.as_string()->get());
        else if (!strings && el.is_integer()) li.push_back(el.as_integer()->get());
        else throw fail(expected);
      }
      if (strings) return ls;
      return li;
    }
  }
  throw fail("a value");
}

Config load_config_from_string(const std::string& toml_text, const std::string& name,
                               const std::vector<std::string>& overrides) {
  // Every error of the deck at once, one line each: those of the file, of each override, then the rules between
  // keys (a file that TOML cannot parse stops at its syntax error).
  DeckErrors errors;
  Config c = Config::defaults();
  c.set_deck_path(name);
  errors.attempt([&] { read_deck(toml_text, name, c, errors); });
  for (const auto& arg : overrides) {
    try {
      apply_override(arg, c);
    } catch (const UserError& e) {
      const size_t eq = arg.find('=');
      errors.add_for_key(eq == std::string::npos ? arg : trim(arg.substr(0, eq)), e.what());
    }
  }
  if (!errors.syntax) resolve_and_check(c, errors);
  errors.throw_if_any();
  return c;
}

Config load_config(const std::string& deck_path, const std::vector<std::string>& overrides) {
  const Activity activity(cat("reading the deck ", deck_path));
  return load_config_from_string(read_file_text(deck_path), deck_path, overrides);
}

}  // namespace hone
