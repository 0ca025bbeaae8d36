// The [parallel] section at `hone check` time: parallel.tp checked against the deck's model (random-init shape or
// a checkpoint's config.json), refused in one line naming the key, where it is written, the dimension it does not
// divide and the sizes that would; a model not on this machine leaves the deck checkable; sequence_parallel's default.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <string>

#include "common/paths.h"
#include "config/config.h"
#include "parallel/tp_check.h"
#include "runtime/error.h"

namespace {

// A random-init model of 16 heads (4 KV heads) with its [parallel] section on line 12.
std::string deck_16_heads(int tp) {
  return "[model]\nhidden_size = 256\nintermediate_size = 128\nnum_layers = 2\nnum_attention_heads = 16\n"
         "num_key_value_heads = 4\n[tokenizer]\nkind = \"chars\"\n[data]\ntask = \"arithmetic\"\n[parallel]\ntp = " +
         std::to_string(tp) + "\n";
}

// The message of the UserError of check_tp_fits_model, or "(no error)"; *skipped takes its return value.
std::string tp_error(const std::string& deck, const std::vector<std::string>& overrides = {},
                     std::string* skipped = nullptr) {
  const hone::Config c = hone::load_config_from_string(deck, "deck.toml", overrides);
  try {
    const std::string s = hone::check_tp_fits_model(c);
    if (skipped) *skipped = s;
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kSixteenHeadsTp3 =
    "parallel.tp = 3 does not divide the 16 attention heads (num_attention_heads); tp = 1, 2, 4, 8 or 16 would "
    "(the deck's random-init shape)";

}  // namespace

BOOST_AUTO_TEST_SUITE(config_parallel)

BOOST_AUTO_TEST_CASE(tp_that_does_not_divide_the_heads_names_the_key_its_place_and_the_sizes_that_work) {
  BOOST_TEST(tp_error(deck_16_heads(3)) == "deck.toml:12:1: " + kSixteenHeadsTp3);
  BOOST_TEST(tp_error(deck_16_heads(1), {"parallel.tp=3"}) == "override 'parallel.tp=3': " + kSixteenHeadsTp3);
  BOOST_TEST(tp_error(deck_16_heads(32)).find("deck.toml:12:1: parallel.tp = 32 does not divide the 16 attention heads") == 0u);
}

BOOST_AUTO_TEST_CASE(tp_that_divides_the_model_passes) {
  for (int tp : {1, 2, 4, 8, 16}) BOOST_TEST(tp_error(deck_16_heads(tp)) == "(no error)", "tp " << tp);
}

BOOST_AUTO_TEST_CASE(kv_heads_must_divide_tp_or_be_divided_by_it) {
  // 24 heads, 6 KV heads: tp = 4 divides the heads but neither divides 6 nor is a multiple of it.
  const std::string deck =
      "[model]\nhidden_size = 384\nintermediate_size = 96\nnum_layers = 1\nnum_attention_heads = 24\n"
      "num_key_value_heads = 6\n[tokenizer]\nkind = \"chars\"\n[data]\ntask = \"arithmetic\"\n[parallel]\ntp = 4\n";
  const std::string m = tp_error(deck);
  BOOST_TEST(m.find("deck.toml:12:1: parallel.tp = 4 neither divides the 6 KV heads (num_key_value_heads)") == 0u, m);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_is_checked_by_its_config_json) {
  const std::string dir = test::source_dir() + "/tests/data/hf/qwen3";  // 4 heads, 2 KV heads, intermediate 64
  const std::string deck = "[model]\npath = \"" + dir + "\"\n[data]\npath = \"data/x.jsonl\"\n";
  BOOST_TEST(tp_error(deck, {"parallel.tp=2"}) == "(no error)");
  BOOST_TEST(tp_error(deck, {"parallel.tp=4"}) == "(no error)");  // each KV head on 2 ranks
  BOOST_TEST(tp_error(deck, {"parallel.tp=3"}) ==
             "override 'parallel.tp=3': parallel.tp = 3 does not divide the 4 attention heads (num_attention_heads); "
             "tp = 1, 2 or 4 would (the model of " + dir + "/config.json)");
}

BOOST_AUTO_TEST_CASE(a_model_not_here_leaves_the_deck_checkable) {
  const std::string deck = "[model]\npath = \"no/such/model\"\n[data]\npath = \"data/x.jsonl\"\n";
  std::string skipped;
  BOOST_TEST(tp_error(deck, {"parallel.tp=3"}, &skipped) == "(no error)");
  BOOST_TEST(skipped == "model.path = \"no/such/model\" has no config.json here");
  BOOST_TEST(tp_error(deck, {}, &skipped) == "(no error)");
  BOOST_TEST(skipped.empty());  // tp = 1 needs no model
}

BOOST_AUTO_TEST_CASE(hone_check_refuses_the_deck_with_exit_two) {
  const std::string dir = test::temp_dir("config-parallel");
  std::ofstream(dir + "/deck.toml") << deck_16_heads(3);
  std::string out;
  const std::string check = test::hone_exe() + " check --deck-only ";
  BOOST_TEST(test::run_command(check + dir + "/deck.toml", &out) == 2);
  BOOST_TEST(out == "hone: error: " + dir + "/deck.toml:12:1: " + kSixteenHeadsTp3 + "\n");
  BOOST_TEST(test::run_command(check + dir + "/deck.toml parallel.tp=4", &out) == 0, out);
  BOOST_TEST(out.find("the deck is valid") != std::string::npos, out);
  // The whole pre-flight names the same problem, as its last line.
  BOOST_TEST(test::run_command(test::hone_exe() + " check " + dir + "/deck.toml --ranks 3", &out) == 2);
  BOOST_TEST(out.find(kSixteenHeadsTp3) != std::string::npos, out);

  std::ofstream(dir + "/later.toml") << "[model]\npath = \"" << dir << "/not-yet\"\n[data]\npath = \"x.jsonl\"\n"
                                     << "[parallel]\ntp = 2\n";
  BOOST_TEST(test::run_command(check + dir + "/later.toml", &out) == 0, out);
  BOOST_TEST(out.find("warning: parallel.tp = 2 not checked against the model: model.path = \"" + dir +
                      "/not-yet\" has no config.json here") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(sequence_parallel_is_on_by_default) {
  const hone::Config d = hone::Config::defaults();
  BOOST_TEST(d.get_bool("parallel.sequence_parallel"));
  const hone::Config c = hone::load_config_from_string(deck_16_heads(2), "deck.toml", {"parallel.sequence_parallel=false"});
  BOOST_TEST(!c.get_bool("parallel.sequence_parallel"));
  BOOST_TEST(c.to_toml().find("sequence_parallel = false") != std::string::npos);
  const std::string resolved = d.to_toml();
  const size_t at = resolved.find("\nsequence_parallel = true ");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  BOOST_TEST(resolved.substr(at + 1, resolved.find('\n', at + 1) - at - 1).find("# default") != std::string::npos);
  const hone::KeySpec* k = hone::find_key_spec("parallel.sequence_parallel");
  BOOST_TEST_REQUIRE(k != nullptr);
  BOOST_TEST(k->description.find("ignored at tp = 1") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
