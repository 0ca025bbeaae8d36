// Deck errors found while reading the file: each is one line naming file:line:column and the full key path.
#include <boost/test/unit_test.hpp>

#include "unit/test_config_util.h"

using test::deck_error;

BOOST_AUTO_TEST_SUITE(config_errors)

BOOST_AUTO_TEST_CASE(unknown_key_names_position_and_suggests_the_nearest_key) {
  BOOST_TEST(deck_error("[run]\nmax_steps = 3\n[grpo]\nnum_generation_per_prompt = 4\n") ==
             "deck.toml:4:1: unknown key 'grpo.num_generation_per_prompt' (did you mean 'grpo.num_generations_per_prompt'?)");
}

BOOST_AUTO_TEST_CASE(unknown_key_in_the_wrong_section_suggests_the_right_section) {
  BOOST_TEST(deck_error("[grpo]\n  temperature = 0.7\n") ==
             "deck.toml:2:3: unknown key 'grpo.temperature' (did you mean 'generation.temperature'?)");
  // A key outside any section.
  BOOST_TEST(deck_error("max_steps = 3\n") == "deck.toml:1:1: unknown key 'max_steps' (did you mean 'run.max_steps'?)");
}

BOOST_AUTO_TEST_CASE(suggestions_forgive_transpositions_and_case) {
  BOOST_TEST(deck_error("[run]\nmax_setps = 3\n") == "deck.toml:2:1: unknown key 'run.max_setps' (did you mean 'run.max_steps'?)");
  BOOST_TEST(deck_error("[run]\nMax_Steps = 3\n") == "deck.toml:2:1: unknown key 'run.Max_Steps' (did you mean 'run.max_steps'?)");
  BOOST_TEST(deck_error("[Train]\nx = 3\n") == "deck.toml:1:1: unknown section '[Train]' (did you mean '[train]'?)");
}

BOOST_AUTO_TEST_CASE(unknown_key_far_from_every_key_gets_no_suggestion) {
  BOOST_TEST(deck_error("[run]\nzzzzzzzz = 1\n") == "deck.toml:2:1: unknown key 'run.zzzzzzzz'");
}

BOOST_AUTO_TEST_CASE(unknown_section) {
  BOOST_TEST(deck_error("[run]\nseed = 1\n\n[grop]\nx = 1\n") == "deck.toml:4:1: unknown section '[grop]' (did you mean '[grpo]'?)");
  BOOST_TEST(deck_error("[run.extra]\nx = 1\n") == "deck.toml:1:1: unknown section '[run.extra]'");
  // A dotted key inside a section is a key, not a section.
  BOOST_TEST(deck_error("[run]\nfoo.bar = 1\n") == "deck.toml:2:1: unknown key 'run.foo'");
}

BOOST_AUTO_TEST_CASE(the_earliest_problem_in_the_file_is_reported) {
  // TOML++ keeps keys sorted; the report must still follow the file's order.
  BOOST_TEST(deck_error("[run]\nzeta = 1\nalpha = 2\n") == "deck.toml:2:1: unknown key 'run.zeta'");
}

// A deck with several mistakes is refused once, every one of them a line: the file's in file order, then each
// override's, then the rules between keys; a rule that names a refused key (left at its default) is not said.
BOOST_AUTO_TEST_CASE(every_error_of_a_deck_in_one_run) {
  const std::string deck = std::string(test::kRandomInitDeck) +
                           "[run]\nmax_step = 3\nseed = \"one\"\n[generation]\ngreedy = true\ntop_k = 5\n"
                           "max_new_tokens = 0\n";
  const std::vector<std::string> errors = test::deck_errors(deck, {"train.learning_rate=fast", "run.max_steps=0"});
  BOOST_TEST_INFO(errors.size());
  BOOST_REQUIRE_EQUAL(errors.size(), 6u);
  BOOST_TEST(errors[0] == "deck.toml:11:1: unknown key 'run.max_step' (did you mean 'run.max_steps'?)");
  BOOST_TEST(errors[1] == "deck.toml:12:8: wrong type for 'run.seed': expected an integer, found a string");
  BOOST_TEST(errors[2].find("deck.toml:16:18: 'generation.max_new_tokens' = 0 is out of range") == 0, errors[2]);
  BOOST_TEST(errors[3] == "override 'train.learning_rate=fast': expected a number");
  BOOST_TEST(errors[4].find("override 'run.max_steps=0': 'run.max_steps' = 0 is out of range") == 0, errors[4]);
  BOOST_TEST(errors[5].find("deck.toml:15:1: conflicting keys 'generation.greedy' = true") == 0, errors[5]);
  // A rule broken by a refused key's default is left out: max_total_sequence_length refused, so its rule with
  // max_new_tokens is not checked against the default.
  const std::vector<std::string> one =
      test::deck_errors(test::kRandomInitDeck, {"generation.max_total_sequence_length=x", "generation.max_new_tokens=4096"});
  BOOST_REQUIRE_EQUAL(one.size(), 1u);
  BOOST_TEST(one[0].find("override 'generation.max_total_sequence_length=x'") == 0, one[0]);
}

BOOST_AUTO_TEST_CASE(wrong_type_says_expected_and_found) {
  BOOST_TEST(deck_error("[run]\nmax_steps = \"abc\"\n") ==
             "deck.toml:2:13: wrong type for 'run.max_steps': expected an integer, found a string");
  BOOST_TEST(deck_error("[run]\nmax_steps = 2.5\n") ==
             "deck.toml:2:13: wrong type for 'run.max_steps': expected an integer, found a float");
  BOOST_TEST(deck_error("[generation]\ngreedy = 1\n") ==
             "deck.toml:2:10: wrong type for 'generation.greedy': expected a boolean (true or false), found an integer");
  BOOST_TEST(deck_error("[generation]\ntemperature = \"hot\"\n") ==
             "deck.toml:2:15: wrong type for 'generation.temperature': expected a number, found a string");
  BOOST_TEST(deck_error("[generation]\nstop_strings = \"</a>\"\n") ==
             "deck.toml:2:16: wrong type for 'generation.stop_strings': expected an array of strings, found a string");
  BOOST_TEST(deck_error("[generation]\nstop_token_ids = [1, \"a\"]\n") ==
             "deck.toml:2:22: wrong type for 'generation.stop_token_ids[1]': expected an integer, found a string");
  BOOST_TEST(deck_error("[[run]]\nseed = 1\n") ==
             "deck.toml:1:3: wrong type for section 'run': expected a table [run], found an array of tables");
}

BOOST_AUTO_TEST_CASE(out_of_range_states_the_range) {
  BOOST_TEST(deck_error("[run]\nmax_steps = 0\n") == "deck.toml:2:13: 'run.max_steps' = 0 is out of range: must be >= 1");
  BOOST_TEST(deck_error("[generation]\ntop_p = 0.0\n") ==
             "deck.toml:2:9: 'generation.top_p' = 0.0 is out of range: must be in (0, 1]");
  BOOST_TEST(deck_error("[generation]\nmin_p = 1.0\n") ==
             "deck.toml:2:9: 'generation.min_p' = 1.0 is out of range: must be in [0, 1)");
  BOOST_TEST(deck_error("[generation]\ntemperature = 0\n") ==
             "deck.toml:2:15: 'generation.temperature' = 0.0 is out of range: must be > 0");
  BOOST_TEST(deck_error("[generation]\ntemperature = nan\n") ==
             "deck.toml:2:15: 'generation.temperature' = nan is not a finite number");
  BOOST_TEST(deck_error("[generation]\nstop_token_ids = [5, -1]\n") ==
             "deck.toml:2:18: 'generation.stop_token_ids[1]' = -1 is out of range: must be >= 0");
  BOOST_TEST(deck_error("[loss]\nratio_clip_c = 0.5\n") ==
             "deck.toml:2:16: 'loss.ratio_clip_c' = 0.5 is out of range: must be 0 (dual clip off) or > 1");
  BOOST_TEST(deck_error("[generation]\nkv_block_size = 24\n") ==
             "deck.toml:2:17: 'generation.kv_block_size' = 24 is not a power of two");
  BOOST_TEST(deck_error("[run]\nname = \"my run\"\n") ==
             "deck.toml:2:8: 'run.name' = 'my run' is not a file name: use only letters, digits, '.', '_', '-'");
}

BOOST_AUTO_TEST_CASE(value_not_allowed_lists_the_allowed_values) {
  BOOST_TEST(deck_error("[run]\ndevice = \"gpu\"\n") ==
             "deck.toml:2:10: 'run.device' = 'gpu' is not one of the allowed values: cpu, cuda");
  BOOST_TEST(deck_error("[loss]\nimportance_sampling = \"is\"\n") ==
             "deck.toml:2:23: 'loss.importance_sampling' = 'is' is not one of the allowed values: none, tis, icepop, seq_mask");
}

BOOST_AUTO_TEST_CASE(toml_syntax_error_names_the_position) {
  const std::string e = deck_error("[run]\nseed = 1\nmax_steps = \n");
  BOOST_TEST(e.rfind("deck.toml:3:", 0) == 0, e);
  BOOST_TEST(e.find("TOML syntax error: ") != std::string::npos, e);
  BOOST_TEST(e.find('\n') == std::string::npos, e);
  const std::string dup = deck_error("[run]\nseed = 1\nseed = 2\n");
  BOOST_TEST(dup.rfind("deck.toml:3:", 0) == 0, dup);
  BOOST_TEST(dup.find("TOML syntax error") != std::string::npos, dup);
}

BOOST_AUTO_TEST_CASE(missing_deck_file) {
  BOOST_CHECK_EXCEPTION(hone::load_config("no/such/deck.toml"), hone::UserError, [](const hone::UserError& e) {
    return std::string(e.what()) == "cannot read deck 'no/such/deck.toml': No such file or directory";
  });
}

// Every integer key is read into a fixed-width type: a value past it is refused, never wrapped (4294967360 would
// become 64 in an int).
BOOST_AUTO_TEST_CASE(integers_beyond_the_target_type_are_refused) {
  const std::string deck = test::kRandomInitDeck;
  BOOST_TEST(deck_error("[model]\nhidden_size = 4294967360\n") ==
             "deck.toml:2:15: 'model.hidden_size' = 4294967360 is out of range: must be at most 2147483647");
  BOOST_TEST(deck_error("[run]\nmax_steps = 9223372036854775807\n") ==
             "deck.toml:2:13: 'run.max_steps' = 9223372036854775807 is out of range: must be at most 2147483647");
  BOOST_TEST(deck_error("[generation]\nstop_token_ids = [1, 2147483648]\n") ==
             "deck.toml:2:18: 'generation.stop_token_ids[1]' = 2147483648 is out of range: must be at most 2147483647");
  BOOST_TEST(deck_error(deck, {"model.hidden_size=4294967360"}) ==
             "override 'model.hidden_size=4294967360': 'model.hidden_size' = 4294967360 is out of range: must be at most 2147483647");
  // The largest value of the target type is accepted; a seed is 64-bit.
  BOOST_TEST(deck_error(deck, {"run.max_steps=2147483647"}) == "(no error)");
  BOOST_TEST(deck_error(deck, {"run.seed=9223372036854775807"}) == "(no error)");
  // Beyond int64 TOML itself refuses the number.
  BOOST_TEST(deck_error("[run]\nseed = 9223372036854775808\n").rfind("deck.toml:2:", 0) == 0);
}

// TOML++ parses dotted keys recursively: a key of 50,000 parts overflowed the stack. Such text is refused first.
BOOST_AUTO_TEST_CASE(keys_and_values_nested_too_deep_are_refused_with_their_position) {
  std::string key = "a";
  for (int n = 0; n < 50000; ++n) key += ".a";
  BOOST_TEST(deck_error("[run]\nseed = 1\n[" + key + "]\n") ==
             "deck.toml:3:129: a dotted key with more than 64 parts (deck keys have two: section.key)");
  // In comments and strings dots are not keys.
  BOOST_TEST(deck_error("# " + key + "\n" + test::kRandomInitDeck + "[run]\nname = \"" + key + "\"\n") == "(no error)");
  BOOST_TEST(deck_error("x = " + std::string(100000, '[') + "\n") ==
             "deck.toml:1:69: arrays or tables nested more than 64 deep");
  BOOST_TEST(deck_error("x = " + std::string(100000, '{') + "\n") ==
             "deck.toml:1:69: arrays or tables nested more than 64 deep");
  // In an override the value is refused as a value.
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"generation.stop_token_ids=" + std::string(100000, '[')}) ==
             "override 'generation.stop_token_ids=" + std::string(100000, '[') +
                 "': expected an array of integers like [1, 2]");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"run.name={" + key + "=1}"}).find("not a file name") != std::string::npos);
}

// TOML++ 3.3 asks whether a character outside ASCII is whitespace, and its table of most of them reaches an
// unreachable branch (undefined behaviour). TOML allows such characters only in strings and comments: elsewhere,
// and right after a line-ending backslash of a multi-line string, they are refused first.
BOOST_AUTO_TEST_CASE(characters_outside_ascii_outside_strings_are_refused_with_their_position) {
  BOOST_TEST(deck_error("[run]\n\xc3\xa9 = 1\n") ==
             "deck.toml:2:1: a character outside ASCII outside a string or comment (TOML allows them only there)");
  BOOST_TEST(deck_error("[run]\nname = \"x\" \xcd\xa0\n") ==
             "deck.toml:2:12: a character outside ASCII outside a string or comment (TOML allows them only there)");
  BOOST_TEST(deck_error("[run]\nname = \"\"\"a\\  \n  \xc3\xa9\"\"\"\n") ==
             "deck.toml:3:3: a character outside ASCII right after a line-ending backslash (escape it, e.g. \\u00e9)");
  // In strings, comments and after a byte order mark they are fine.
  BOOST_TEST(deck_error("\xEF\xBB\xBF# gr\xc3\xbc\xc3\x9f" "e\n" + std::string(test::kRandomInitDeck) +
                        "[output]\ndir = \"\"\"\xe2\x88\x91 a\\\n  b \xc3\xa9\"\"\"\n") == "(no error)");
}

// A NUL byte ends a path or a command where the operating system reads it: refused, and shown in the message.
BOOST_AUTO_TEST_CASE(strings_with_a_nul_byte_are_refused) {
  const std::string nul = " is a string with a NUL byte (\\u0000), which no path, command or text of hone can carry";
  BOOST_TEST(deck_error("[output]\ndir = \"o/nulA\\u0000B\"\n") == "deck.toml:2:7: 'output.dir' = 'o/nulA\\u0000B'" + nul);
  BOOST_TEST(deck_error("[generation]\nstop_strings = [\"a\", \"b\\u0000\"]\n") ==
             "deck.toml:2:16: 'generation.stop_strings[1]' = 'b\\u0000'" + nul);
  BOOST_TEST(deck_error("[reward]\ncommand = \"x\\u0000y\"\n").find(nul) != std::string::npos);
  BOOST_TEST(deck_error("[data]\ntask = \"jsonl\"\npath = \"d\\u0000.jsonl\"\n") ==
             "deck.toml:3:8: 'data.path' = 'd\\u0000.jsonl'" + nul);
}

BOOST_AUTO_TEST_SUITE_END()
