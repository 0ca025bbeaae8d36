// Command-line overrides `key=value`: typed by the schema, applied over the deck, errors naming the argument.
#include <boost/test/unit_test.hpp>

#include "unit/test_config_util.h"

using test::deck_error;

namespace {
hone::Config with(const std::vector<std::string>& overrides) {
  return hone::load_config_from_string(test::kCheckpointDeck, "deck.toml", overrides);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(config_overrides)

BOOST_AUTO_TEST_CASE(each_type_is_parsed_by_the_schema) {
  const hone::Config c = with({"grpo.num_generations_per_prompt=8", "train.learning_rate=3e-6", "loss.kl_coef=1",
                               "generation.greedy=true", "run.name=my-run", "output.dir=\"runs/a b\"", "run.device=cuda",
                               "generation.stop_strings=[\"</answer>\", \"\\n\\n\"]", "generation.stop_token_ids=[151645, 7]",
                               "train.max_grad_norm=.5"});
  BOOST_TEST(c.get_int("grpo.num_generations_per_prompt") == 8);
  BOOST_TEST(c.get_float("train.learning_rate") == 3e-6);
  BOOST_TEST(c.get_float("loss.kl_coef") == 1.0);  // an integer is a fine float
  BOOST_TEST(c.get_bool("generation.greedy"));
  BOOST_TEST(c.get_string("run.name") == "my-run");  // bare text is a string
  BOOST_TEST(c.get_string("output.dir") == "runs/a b");  // quoted text is a TOML string
  BOOST_TEST(c.get_string("run.device") == "cuda");
  BOOST_TEST((c.get_string_list("generation.stop_strings") == std::vector<std::string>{"</answer>", "\n\n"}));
  BOOST_TEST((c.get_int_list("generation.stop_token_ids") == std::vector<int64_t>{151645, 7}));
  BOOST_TEST(c.get_float("train.max_grad_norm") == 0.5);
  BOOST_TEST(c.source("grpo.num_generations_per_prompt").describe() == "override 'grpo.num_generations_per_prompt=8'");
  BOOST_TEST(c.is_set("run.device"));
  BOOST_TEST(c.overrides().size() == 10u);
}

BOOST_AUTO_TEST_CASE(an_override_wins_over_the_deck_and_the_last_one_wins) {
  const hone::Config c = hone::load_config_from_string("[run]\nmax_steps = 7\n[model]\npath = \"m\"\n[data]\npath = \"x\"\n",
                                                       "deck.toml", {"run.max_steps=3", "run.max_steps=4"});
  BOOST_TEST(c.get_int("run.max_steps") == 4);
  BOOST_TEST(c.source("run.max_steps").describe() == "override 'run.max_steps=4'");
  // An override can supply what the deck lacks.
  BOOST_TEST(deck_error("[model]\npath = \"m\"\n", {"data.path=train.jsonl"}) == "(no error)");
  BOOST_TEST(with({"generation.stop_strings=[]"}).get_string_list("generation.stop_strings").empty());
}

BOOST_AUTO_TEST_CASE(type_errors_name_the_argument) {
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.max_steps=abc"}) == "override 'run.max_steps=abc': expected an integer");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.max_steps=2.5"}) == "override 'run.max_steps=2.5': expected an integer");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.max_steps="}) == "override 'run.max_steps=': expected an integer");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.greedy=yes"}) ==
             "override 'generation.greedy=yes': expected true or false");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"train.learning_rate=fast"}) ==
             "override 'train.learning_rate=fast': expected a number");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.stop_strings=</a>"}) ==
             "override 'generation.stop_strings=</a>': expected an array of strings like [\"a\", \"b\"]");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.stop_token_ids=[1,\"a\"]"}) ==
             "override 'generation.stop_token_ids=[1,\"a\"]': expected an array of integers like [1, 2]");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.name=\"open"}) ==
             "override 'run.name=\"open': expected a string: the quotes do not match");
}

BOOST_AUTO_TEST_CASE(value_errors_name_the_argument) {
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.max_steps=0"}) ==
             "override 'run.max_steps=0': 'run.max_steps' = 0 is out of range: must be >= 1");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.device=gpu"}) ==
             "override 'run.device=gpu': 'run.device' = 'gpu' is not one of the allowed values: cpu, cuda");
}

BOOST_AUTO_TEST_CASE(unknown_keys_and_bad_syntax) {
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"grpo.num_generation_per_prompt=16"}) ==
             "override 'grpo.num_generation_per_prompt=16': unknown key 'grpo.num_generation_per_prompt' "
             "(did you mean 'grpo.num_generations_per_prompt'?)");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"max_steps=3"}) ==
             "override 'max_steps=3': unknown key 'max_steps' (did you mean 'run.max_steps'?)");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"run.max_steps"}) ==
             "override 'run.max_steps': expected key=value (e.g. run.max_steps=3)");
}

BOOST_AUTO_TEST_SUITE_END()
