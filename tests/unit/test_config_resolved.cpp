// The resolved config: defaults, sources, derived defaults, the typed accessors, and the to_toml round trip.
#include <boost/test/unit_test.hpp>

#include "unit/test_config_util.h"

BOOST_AUTO_TEST_SUITE(config_resolved)

BOOST_AUTO_TEST_CASE(every_schema_key_has_a_value_or_says_why_not) {
  const hone::Config c = hone::load_config_from_string(test::kCheckpointDeck, "deck.toml");
  int without = 0;
  for (const auto& k : hone::deck_schema()) {
    if (!c.has_value(k.path)) {
      ++without;
      BOOST_TEST((!k.default_value && k.derived_from.empty()), k.path);
    }
  }
  // With model.path set: the four required random-init shape keys have no value; data.path is given; and
  // loss.moe_aux_loss_coef, whose absence means the model's own coefficient.
  BOOST_TEST(without == 5);
}

BOOST_AUTO_TEST_CASE(defaults_and_sources) {
  const hone::Config c = hone::load_config_from_string("[run]\nmax_steps = 7\n[model]\npath = \"m\"\n[data]\npath = \"x\"\n",
                                                       "deck.toml");
  BOOST_TEST(c.get_int("run.max_steps") == 7);
  BOOST_TEST(c.is_set("run.max_steps"));
  BOOST_TEST(c.source("run.max_steps").describe() == "deck.toml:2:1");
  BOOST_TEST(c.get_int("grpo.num_generations_per_prompt") == 16);
  BOOST_TEST(!c.is_set("grpo.num_generations_per_prompt"));
  BOOST_TEST(c.source("grpo.num_generations_per_prompt").describe() == "default");
  BOOST_TEST(c.get_string("run.device") == "cpu");
  BOOST_TEST(c.get_float("loss.kl_input_clamp") == 20.0);
  BOOST_TEST(c.get_bool("grpo.normalize_rewards"));
  BOOST_TEST(c.get_string("data.prompt_key") == "prompt");
  BOOST_TEST(c.get_string_list("generation.stop_strings").empty());
  // Derived defaults: the tokenizer lives with the checkpoint unless told otherwise.
  BOOST_TEST(c.get_string("tokenizer.path") == "m");
  BOOST_TEST(c.source("tokenizer.path").describe() == "default (model.path)");
  BOOST_TEST(c.get_int("model.max_position_embeddings") == 4096);
}

BOOST_AUTO_TEST_CASE(accessor_misuse_is_a_programmer_error) {
  const hone::Config c = hone::load_config_from_string(test::kCheckpointDeck, "deck.toml");
  BOOST_CHECK_THROW(c.get_int("grpo.no_such_key"), hone::Error);
  BOOST_CHECK_THROW(c.get_float("run.max_steps"), hone::Error);
  BOOST_CHECK_THROW(c.get_int("train.learning_rate"), hone::Error);
  BOOST_CHECK_THROW(c.get_bool("run.name"), hone::Error);
  BOOST_CHECK_THROW(c.get_string_list("generation.stop_token_ids"), hone::Error);
  BOOST_CHECK_THROW(c.get_int("model.hidden_size"), hone::Error);  // no value: check has_value first
  BOOST_CHECK_THROW(c.is_set("nope"), hone::Error);
  BOOST_TEST(c.get_string("run.device") == "cpu");  // enums read as strings
}

BOOST_AUTO_TEST_CASE(to_toml_round_trips_every_value) {
  const std::vector<std::string> overrides{"run.max_steps=3", "generation.stop_strings=[\"</answer>\", \"a\\\"b\\\\c\\n\"]",
                                           "generation.stop_token_ids=[1, 2]", "train.learning_rate=3.14159e-7",
                                           "tokenizer.system_prompt=\"Think. # not a comment\"", "loss.ratio_clip_c=3"};
  for (const char* deck : {test::kCheckpointDeck, test::kRandomInitDeck}) {
    const hone::Config a = hone::load_config_from_string(deck, "deck.toml", overrides);
    const std::string text = a.to_toml();
    const hone::Config b = hone::load_config_from_string(text, "resolved.toml");
    for (const auto& k : hone::deck_schema()) {
      BOOST_TEST(a.has_value(k.path) == b.has_value(k.path), k.path);
      if (a.has_value(k.path) && b.has_value(k.path)) BOOST_TEST((a.value(k.path) == b.value(k.path)), k.path);
    }
    // Rendering again gives the same values, and defaults are marked as such.
    BOOST_TEST(text.find("num_generations_per_prompt = 16") != std::string::npos);
    BOOST_TEST(text.find("# default") != std::string::npos);
    BOOST_TEST(text.find("max_steps = 3") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(to_toml_comments_out_what_has_no_value_or_is_not_used) {
  const std::string text = hone::load_config_from_string(test::kCheckpointDeck, "deck.toml").to_toml();
  BOOST_TEST(text.find("\n# hidden_size =") != std::string::npos);
  BOOST_TEST(text.find("\n# rope_theta = 1000000.0") != std::string::npos);  // a random-init key with model.path set
  BOOST_TEST(text.find("\npath = \"models/m\"") != std::string::npos);
  const std::string random = hone::load_config_from_string(test::kRandomInitDeck, "deck.toml").to_toml();
  BOOST_TEST(random.find("\nrope_theta = 1000000.0") != std::string::npos);
  BOOST_TEST(random.find("\n# path =") != std::string::npos);  // data.path: no value
  // Every section is present, in schema order.
  size_t pos = 0;
  for (const auto& s : hone::deck_sections()) {
    const size_t at = random.find("\n[" + s.name + "]\n");
    BOOST_TEST(at != std::string::npos, s.name);
    BOOST_TEST(at > pos, s.name);
    pos = at;
  }
}

BOOST_AUTO_TEST_CASE(floats_are_rendered_exactly) {
  for (double x : {0.1, 1e-6, 3.14159e-7, 600.0, 1e20, 0.999, 2.0 / 3.0}) {
    const std::string t = hone::deck_value_to_toml(hone::DeckValue(x));
    BOOST_TEST(std::strtod(t.c_str(), nullptr) == x, t);
    BOOST_TEST(t.find_first_of(".e") != std::string::npos, t);  // TOML reads it as a float
  }
  BOOST_TEST(hone::deck_value_to_toml(hone::DeckValue(600.0)) == "600.0");
  BOOST_TEST(hone::deck_value_to_toml(hone::DeckValue(0.02)) == "0.02");
}

BOOST_AUTO_TEST_CASE(schema_is_well_formed) {
  for (const auto& k : hone::deck_schema()) {
    BOOST_TEST(hone::is_deck_section(k.section()), k.path);
    BOOST_TEST(!k.description.empty(), k.path);
    BOOST_TEST((k.type == hone::KeyType::enumeration) == !k.allowed.empty(), k.path);
    if (k.default_value) BOOST_TEST(hone::check_deck_value(k, *k.default_value) == "", k.path);
    if (!k.derived_from.empty()) BOOST_TEST(hone::find_key_spec(k.derived_from) != nullptr, k.path);
    BOOST_TEST(hone::find_key_spec(k.path) == &k, k.path);
  }
}

BOOST_AUTO_TEST_SUITE_END()
