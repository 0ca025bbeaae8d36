// `hone check` (the deck alone, and the pre-flight of what it names), `hone help`, `hone help deck` through the
// executable, and doc/deck.md kept equal to the schema.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "common/paths.h"
#include "config/deck_reference.h"
#include "config/schema.h"

namespace {
std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(config_commands)

BOOST_AUTO_TEST_CASE(check_misspelled_key_prints_one_line_and_exits_two) {
  std::string out;
  const int rc = test::run_command(test::hone_exe() + " check " + test::source_dir() + "/tests/data/decks/misspelled.toml", &out);
  BOOST_TEST(rc == 2);
  BOOST_TEST(out == "hone: error: " + test::source_dir() +
                        "/tests/data/decks/misspelled.toml:10:3: unknown key 'grpo.num_generation_per_prompt' "
                        "(did you mean 'grpo.num_generations_per_prompt'?)\n");
}

BOOST_AUTO_TEST_CASE(check_prints_the_resolved_deck_which_checks_again) {
  const std::string dir = test::temp_dir("config-check");
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " check input/demo.toml run.max_steps=3 --deck-only --echo-deck > " +
                                   dir + "/resolved.toml", &out) == 0);
  const std::string resolved = read_text(dir + "/resolved.toml");
  BOOST_TEST(resolved.find("max_steps = 3") != std::string::npos);
  BOOST_TEST(resolved.find("[output]") != std::string::npos);
  std::string again;
  BOOST_TEST(test::run_command(test::hone_exe() + " check --deck-only " + dir + "/resolved.toml", &again) == 0, again);
}

// The models of qwen3-math.toml and smollm2-arithmetic.toml are fetched by their users: the deck alone is checked.
BOOST_AUTO_TEST_CASE(example_decks_are_valid) {
  for (const char* deck : {"input/demo.toml --deck-only", "input/qwen3-math.toml --deck-only",
                           "input/smollm2-arithmetic.toml --deck-only", "input/demo.toml"}) {
    std::string out;
    BOOST_TEST(test::run_command(test::hone_exe() + " check " + deck, &out) == 0, deck << ": " << out);
  }
}

BOOST_AUTO_TEST_CASE(check_without_a_deck_or_with_a_bad_override_exits_two) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " check", &out) == 2);
  BOOST_TEST(test::run_command(test::hone_exe() + " check input/demo.toml run.max_steps=abc", &out) == 2);
  BOOST_TEST(out == "hone: error: override 'run.max_steps=abc': expected an integer\n");
}

BOOST_AUTO_TEST_CASE(help_lists_the_commands) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " help", &out) == 0);
  BOOST_TEST(out.find("usage: hone <command>") != std::string::npos);
  BOOST_TEST(out.find("  check ") != std::string::npos);
  BOOST_TEST(out.find("  help ") != std::string::npos);
  BOOST_TEST(test::run_command(test::hone_exe() + " help nonsense", &out) == 2);
  BOOST_TEST(test::run_command(test::hone_exe() + " help run", &out) == 0);
  BOOST_TEST(out.find("usage: hone run deck.toml") == 0);
}

BOOST_AUTO_TEST_CASE(help_deck_documents_every_key) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " help deck", &out) == 0);
  for (const auto& k : hone::deck_schema()) BOOST_TEST(out.find("  " + k.path + "  (") != std::string::npos, k.path);
  BOOST_TEST(out.find("one of: cpu | cuda") != std::string::npos);
  BOOST_TEST(out.find("[GiB]") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(doc_deck_md_is_up_to_date) {
  const std::string committed = read_text(test::source_dir() + "/doc/deck.md");
  BOOST_TEST((committed == hone::deck_reference_markdown()), "doc/deck.md is stale: run `make doc-deck`");
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " help deck --markdown", &out) == 0);
  BOOST_TEST((out == committed));
}

BOOST_AUTO_TEST_SUITE_END()
