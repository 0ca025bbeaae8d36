// The documentation names only what exists: every deck key written in doc/*.md (`section.key` anywhere in the text,
// `key = value` lines under a [section] of a TOML example) is in the schema, and every `hone <command>` in code (a
// backtick span or a fenced block) is a registered command. A renamed or removed key or command fails here, so the
// docs cannot go stale silently.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/paths.h"
#include "config/schema.h"
#include "runtime/command.h"

namespace fs = std::filesystem;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<std::string> doc_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(test::source_dir() + "/doc"))
    if (e.path().extension() == ".md") files.push_back(e.path().string());
  files.push_back(test::source_dir() + "/README.md");
  std::sort(files.begin(), files.end());
  return files;
}

// A dotted word that is a file name rather than a key: model.safetensors, data.jsonl, output.md ...
bool is_file_name(const std::string& key_part) {
  static const std::set<std::string> ext = {"safetensors", "json", "jsonl", "h5", "md", "toml", "cpp", "h", "cu",
                                            "py", "sh", "txt", "bin", "out", "log", "sbatch", "so", "tar", "xz", "png", "c"};
  return ext.count(key_part) > 0;
}

struct Finding {
  std::string file;
  int line;
  std::string what;
};

// `section.key` anywhere: a section name of the schema, a dot, a lower-case word; not part of a path, a longer
// dotted name (model.layers.<i>), a call (model.named_parameters()) or a pattern (train.adam_*).
void find_keys(const std::string& file, const std::string& text, std::vector<Finding>& bad, int& seen) {
  std::set<std::string> sections;
  for (const auto& s : hone::deck_sections()) sections.insert(s.name);
  static const std::regex re(R"(([A-Za-z0-9_./-]?)\b([a-z]+)\.([a-z][a-z0-9_]*)\b)");
  int line = 1;
  size_t counted = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    for (; counted < size_t(m.position(0)); ++counted)
      if (text[counted] == '\n') ++line;
    if (!sections.count(m[2].str())) continue;
    if (!m[1].str().empty() && m[1].str() != "." && m[1].str() != "-") continue;  // inside a path or a word
    if (m[1].str() == ".") continue;                                               // the tail of a longer name
    const size_t end = size_t(m.position(0) + m.length(0));
    const char next = end < text.size() ? text[end] : ' ', after = end + 1 < text.size() ? text[end + 1] : ' ';
    if (next == '(' || next == '*') continue;
    if (next == '.' && !std::isspace(static_cast<unsigned char>(after))) continue;  // a longer dotted name
    if (is_file_name(m[3].str())) continue;
    const std::string key = m[2].str() + "." + m[3].str();
    ++seen;
    if (!hone::find_key_spec(key)) bad.push_back({file, line, "deck key '" + key + "'"});
  }
}

// Inside ```toml fences: `key = value` under `[section]`.
void find_toml_keys(const std::string& file, const std::string& text, std::vector<Finding>& bad, int& seen) {
  std::istringstream in(text);
  std::string l, section;
  bool in_toml = false, in_fence = false;
  int line = 0;
  static const std::regex header(R"(^\s*\[([a-z_]+)\]\s*(#.*)?$)");
  static const std::regex assign(R"(^\s*([a-z_][a-z0-9_]*)\s*=)");
  while (std::getline(in, l)) {
    ++line;
    if (l.rfind("```", 0) == 0) {
      in_toml = !in_fence && l.find("toml") != std::string::npos;
      in_fence = !in_fence;
      section.clear();
      continue;
    }
    if (!in_toml) continue;
    std::smatch m;
    if (std::regex_search(l, m, header)) {
      section = m[1].str();
      if (!hone::is_deck_section(section)) bad.push_back({file, line, "deck section '[" + section + "]'"});
    } else if (!section.empty() && std::regex_search(l, m, assign)) {
      ++seen;
      const std::string key = section + "." + m[1].str();
      if (!hone::find_key_spec(key)) bad.push_back({file, line, "deck key '" + key + "' (TOML example)"});
    }
  }
}

// `hone <word>` in backtick spans and fenced blocks, where a command line is: at the start (after a `$ ` prompt), after
// a path (build/hone), a pipe or a command separator, or after srun / mpirun and their options.
void find_commands(const std::string& file, const std::string& text, std::vector<Finding>& bad, int& seen) {
  std::istringstream in(text);
  std::string l;
  bool in_fence = false;
  int line = 0;
  static const std::regex cmd(R"((?:^\s*(?:\$\s+)?|/|\|\s*|&&\s*|;\s*|(?:srun|mpirun)\b[^|;&]*?\s)hone ([a-z][a-z-]*))");
  static const std::regex span("`[^`]+`");
  while (std::getline(in, l)) {
    ++line;
    if (l.rfind("```", 0) == 0) {
      in_fence = !in_fence;
      continue;
    }
    std::vector<std::string> code;
    if (in_fence) {
      code.push_back(l);
    } else {
      for (auto it = std::sregex_iterator(l.begin(), l.end(), span); it != std::sregex_iterator(); ++it)
        code.push_back(it->str().substr(1, it->str().size() - 2));
    }
    for (const auto& c : code)
      for (auto it = std::sregex_iterator(c.begin(), c.end(), cmd); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1].str();
        ++seen;
        if (!hone::find_command(name) && name != "version")
          bad.push_back({file, line, "command 'hone " + name + "'"});
      }
  }
}

std::string report(const std::vector<Finding>& bad) {
  std::string s;
  for (const auto& f : bad) s += "\n  " + f.file + ":" + std::to_string(f.line) + ": " + f.what + " does not exist";
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(doc_references)

// doc/coming-from-nemo-rl-or-verl.md maps other frameworks' keys to hone's: in its tables the first two columns are
// NeMo-RL's and verl's names (grpo.max_num_steps, data.train_batch_size), not hone's. Those cells are blanked
// (their length kept, so line numbers stay right); the third column, hone's, is checked as everywhere.
std::string without_foreign_columns(const std::string& file, const std::string& text) {
  if (fs::path(file).filename() != "coming-from-nemo-rl-or-verl.md") return text;
  std::string out = text;
  size_t line = 0;
  while (line < out.size()) {
    size_t end = out.find('\n', line);
    if (end == std::string::npos) end = out.size();
    if (out[line] == '|') {
      int bar = 0;
      for (size_t i = line; i < end; ++i) {
        if (out[i] == '|') {
          if (++bar == 3) break;
        } else if (bar >= 1) {
          out[i] = ' ';
        }
      }
    }
    line = end + 1;
  }
  return out;
}

BOOST_AUTO_TEST_CASE(every_deck_key_named_in_the_docs_exists) {
  std::vector<Finding> bad;
  int seen = 0;
  for (const auto& f : doc_files()) {
    const std::string text = without_foreign_columns(f, read_text(f));
    find_keys(f, text, bad, seen);
    find_toml_keys(f, text, bad, seen);
  }
  BOOST_TEST(seen > 100);  // the scan finds the keys the docs are full of
  BOOST_TEST(bad.empty(), report(bad));
}

BOOST_AUTO_TEST_CASE(every_command_named_in_the_docs_exists) {
  std::vector<Finding> bad;
  int seen = 0;
  for (const auto& f : doc_files()) find_commands(f, read_text(f), bad, seen);
  BOOST_TEST(seen > 20);
  BOOST_TEST(bad.empty(), report(bad));
}

// The scanners themselves: a wrong key, section and command are found, file names and paths are not keys.
BOOST_AUTO_TEST_CASE(the_scan_finds_what_does_not_exist) {
  std::vector<Finding> bad;
  int seen = 0;
  find_keys("x.md", "set `run.max_steps` and grpo.no_such_key; see doc/output.md, model.safetensors, "
                    "model.safetensors.index.json, out/run.name.h5, model.layers.<i>, model.named_parameters(), "
                    "train.adam_*, and run.seed.\n", bad, seen);
  BOOST_TEST(seen == 3);
  BOOST_REQUIRE_EQUAL(bad.size(), 1u);
  BOOST_TEST(bad[0].what == "deck key 'grpo.no_such_key'");
  bad.clear();
  find_toml_keys("x.md", "```toml\n[run]\nmax_steps = 3\nmax_stepz = 4\n[nope]\n```\n[run]\nfoo = 1\n", bad, seen);
  BOOST_REQUIRE_EQUAL(bad.size(), 2u);
  BOOST_TEST(bad[0].what == "deck key 'run.max_stepz' (TOML example)");
  BOOST_TEST(bad[1].line == 5);
  bad.clear();
  find_commands("x.md", "hone frobs in prose; `hone run deck.toml`, `hone frob x`, `the hone output file`\n```sh\n"
                "build/hone chek d\nmpirun -np 2 hone ranks | hone runn\n```\n", bad, seen);
  BOOST_REQUIRE_EQUAL(bad.size(), 3u);
  BOOST_TEST(bad[0].what == "command 'hone frob'");
  BOOST_TEST(bad[1].what == "command 'hone chek'");
  BOOST_TEST(bad[1].line == 3);
  BOOST_TEST(bad[2].what == "command 'hone runn'");
}

BOOST_AUTO_TEST_SUITE_END()
