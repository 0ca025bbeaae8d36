// Deck rules over several keys: conditional requirements and conflicting keys, each naming where the values came from.
#include <boost/test/unit_test.hpp>

#include "unit/test_config_util.h"

using test::deck_error;

BOOST_AUTO_TEST_SUITE(config_rules)

BOOST_AUTO_TEST_CASE(the_minimal_decks_are_valid) {
  BOOST_TEST(deck_error(test::kCheckpointDeck) == "(no error)");
  BOOST_TEST(deck_error(test::kRandomInitDeck) == "(no error)");
}

BOOST_AUTO_TEST_CASE(jsonl_task_needs_a_path_and_says_where_the_task_came_from) {
  BOOST_TEST(deck_error("[model]\npath = \"m\"\n") ==
             "deck.toml: missing required key 'data.path' (required because 'data.task' = 'jsonl' (default))");
  BOOST_TEST(deck_error("[model]\npath = \"m\"\n[data]\ntask = \"jsonl\"\n") ==
             "deck.toml:4:1: missing required key 'data.path' (required because 'data.task' = 'jsonl' (deck.toml:4:1))");
  BOOST_TEST(deck_error("[model]\npath = \"m\"\n[data]\nshuffle = false\n") ==
             "deck.toml:3:1: missing required key 'data.path' (required because 'data.task' = 'jsonl' (default))");
  BOOST_TEST(deck_error("[model]\npath = \"m\"\n[data]\ntask = \"sort\"\n", {"data.task=jsonl"}) ==
             "override 'data.task=jsonl': missing required key 'data.path' (required because 'data.task' = 'jsonl' "
             "(override 'data.task=jsonl'))");
}

BOOST_AUTO_TEST_CASE(random_init_needs_its_shape) {
  BOOST_TEST(deck_error("[tokenizer]\nkind = \"chars\"\n[data]\ntask = \"sort\"\n[model]\nhidden_size = 64\n") ==
             "deck.toml:5:1: missing required key 'model.intermediate_size' (required because 'model.path' = '' (default): "
             "a random-init model needs its shape)");
}

BOOST_AUTO_TEST_CASE(model_path_conflicts_with_shape_keys) {
  BOOST_TEST(deck_error("[model]\npath = \"m\"\nnum_layers = 2\n[data]\npath = \"x\"\n") ==
             "deck.toml:3:1: conflicting keys 'model.path' = 'm' (deck.toml:2:1) and 'model.num_layers' = 2 (deck.toml:3:1): "
             "a checkpoint's shape comes from its config.json; remove the shape key or model.path");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"model.path=models/q"}) ==
             "deck.toml:2:1: conflicting keys 'model.path' = 'models/q' (override 'model.path=models/q') and "
             "'model.hidden_size' = 64 (deck.toml:2:1): a checkpoint's shape comes from its config.json; remove the shape key "
             "or model.path");
}

BOOST_AUTO_TEST_CASE(random_init_shape_must_be_consistent) {
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"model.num_attention_heads=3"}) ==
             "override 'model.num_attention_heads=3': conflicting keys 'model.hidden_size' = 64 (deck.toml:2:1) and "
             "'model.num_attention_heads' = 3 (override 'model.num_attention_heads=3'): hidden_size must be a multiple of "
             "num_attention_heads when head_dim = 0");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"model.num_key_value_heads=3"}).find(
                 "num_attention_heads must be a multiple of num_key_value_heads") != std::string::npos);
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"model.head_dim=15"}).find("the head width (15) must be even") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(hf_tokenizer_needs_a_path) {
  BOOST_TEST(deck_error("[model]\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\nnum_attention_heads = 4\n"
                        "[data]\ntask = \"sort\"\n") ==
             "deck.toml: missing required key 'tokenizer.path' (required because 'tokenizer.kind' = 'hf' (default) and "
             "model.path is empty: the tokenizer.json must come from somewhere)");
  // Given explicitly, a random-init model may use a real tokenizer.
  BOOST_TEST(deck_error("[model]\nhidden_size = 64\nintermediate_size = 128\nnum_layers = 2\nnum_attention_heads = 4\n"
                        "[data]\ntask = \"sort\"\n[tokenizer]\npath = \"tok\"\n") == "(no error)");
}

BOOST_AUTO_TEST_CASE(tp_comm_overlap_needs_sequence_parallelism) {
  BOOST_TEST(deck_error(test::kCheckpointDeck,
                        {"parallel.tp=2", "parallel.sequence_parallel=false", "parallel.tp_comm_overlap=true"}) ==
             "override 'parallel.tp_comm_overlap=true': conflicting keys 'parallel.sequence_parallel' = false (override "
             "'parallel.sequence_parallel=false') and 'parallel.tp_comm_overlap' = true (override "
             "'parallel.tp_comm_overlap=true'): the overlap moves the sequence-parallel all-gathers and reduce-scatters; "
             "turn sequence_parallel on or tp_comm_overlap off");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"parallel.tp=2", "parallel.tp_comm_overlap=true"}) == "(no error)");
  // At tp = 1 both are ignored.
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"parallel.sequence_parallel=false", "parallel.tp_comm_overlap=true"}) ==
             "(no error)");
}

BOOST_AUTO_TEST_CASE(greedy_conflicts_with_sampling_filters) {
  const std::string deck = std::string(test::kCheckpointDeck) + "[generation]\ngreedy = true\ntop_k = 5\n";
  BOOST_TEST(deck_error(deck) ==
             "deck.toml:7:1: conflicting keys 'generation.greedy' = true (deck.toml:6:1) and 'generation.top_k' = 5 "
             "(deck.toml:7:1): greedy decoding does not sample; remove greedy or the sampling filter");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.greedy=true", "generation.top_p=0.9"}).find(
                 "conflicting keys 'generation.greedy' = true (override 'generation.greedy=true') and 'generation.top_p' = 0.9") !=
             std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.greedy=true", "generation.min_p=0.1"}).find("'generation.min_p'") !=
             std::string::npos);
  // Neutral values are not a conflict.
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.greedy=true", "generation.top_p=1"}) == "(no error)");
}

BOOST_AUTO_TEST_CASE(global_batch_size_must_divide_the_rollouts) {
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"train.global_batch_size=100"}) ==
             "override 'train.global_batch_size=100': conflicting keys 'train.global_batch_size' = 100 "
             "(override 'train.global_batch_size=100') and grpo.num_prompts_per_step * grpo.num_generations_per_prompt = "
             "32 * 16 = 512: global_batch_size must divide the rollouts of a step");
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"train.global_batch_size=128"}) == "(no error)");
}

// Drawn response lengths are a benchmark rule of the random_tokens task: any other task is refused at the key's
// line (or override), and the rule is exact only when nothing else stops a sample.
BOOST_AUTO_TEST_CASE(response_length_is_for_random_tokens_benchmarks_only) {
  const std::string deck = std::string(test::kRandomInitDeck) + "response_length = \"lognormal\"\n";
  BOOST_TEST(deck_error(deck) ==
             "deck.toml:10:1: 'data.response_length' = 'lognormal' (deck.toml:10:1) is for benchmarks of the "
             "random_tokens task only (the drawn lengths ignore what the model writes), not for 'data.task' = "
             "'arithmetic' (deck.toml:9:1): remove data.response_length");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.response_length=fixed"}) ==
             "override 'data.response_length=fixed': 'data.response_length' = 'fixed' (override "
             "'data.response_length=fixed') is for benchmarks of the random_tokens task only (the drawn lengths ignore "
             "what the model writes), not for 'data.task' = 'arithmetic' (deck.toml:9:1): remove data.response_length");
  const std::vector<std::string> bench = {"data.task=random_tokens", "generation.ignore_eos=true",
                                          "generation.max_new_tokens=2048"};
  BOOST_TEST(deck_error(deck, bench) == "(no error)");
  BOOST_TEST(deck_error(deck, {"data.task=random_tokens", "generation.max_new_tokens=2048"}) ==
             "deck.toml:10:1: conflicting keys 'data.response_length' = 'lognormal' (deck.toml:10:1) and "
             "'generation.ignore_eos' = false (default): a sample stops exactly at its drawn length only when nothing "
             "stops it first");
  std::vector<std::string> args = bench;
  args.push_back("generation.stop_token_ids=[3]");
  BOOST_TEST(deck_error(deck, args).find("'generation.stop_token_ids' = [3]") != std::string::npos);
  // The mean must be below its cap (lognormal) or at most the cap (fixed); with both at their defaults (800 and
  // 512) the error points at the rule.
  BOOST_TEST(deck_error(deck, {"data.task=random_tokens", "generation.ignore_eos=true"}) ==
             "deck.toml:10:1: conflicting keys 'data.response_length_mean' = 800.0 (default) and "
             "'generation.max_new_tokens' = 512 (default): the mean of the drawn lengths must be below their cap, "
             "generation.max_new_tokens");
  args = bench;
  args.push_back("data.response_length_mean=2048");
  BOOST_TEST(deck_error(deck, args) ==
             "override 'data.response_length_mean=2048': conflicting keys 'data.response_length_mean' = 2048.0 "
             "(override 'data.response_length_mean=2048') and 'generation.max_new_tokens' = 2048 (override "
             "'generation.max_new_tokens=2048'): the mean of the drawn lengths must be below their cap, "
             "generation.max_new_tokens");
  args.push_back("data.response_length=fixed");
  BOOST_TEST(deck_error(deck, args) == "(no error)");
  args.push_back("data.response_length_sigma=1.5");
  BOOST_TEST(deck_error(deck, args).find("fixed lengths have no spread") != std::string::npos);
  // The shape keys alone, without a rule, are refused too.
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.response_length_sigma=1.2"}).find(
                 "'data.response_length_sigma' = 1.2 (override 'data.response_length_sigma=1.2'): the key has nothing "
                 "to act on") != std::string::npos);
}

// data.partial_credit acts on the sort and reverse checkers only: another task, or a reward of your own, refuses it.
BOOST_AUTO_TEST_CASE(partial_credit_is_for_sort_and_reverse_only) {
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.partial_credit=true"}) ==
             "override 'data.partial_credit=true': conflicting keys 'data.task' = 'arithmetic' (deck.toml:9:1) and "
             "'data.partial_credit' = true (override 'data.partial_credit=true'): partial credit is defined for the "
             "sort and reverse tasks only; remove the key");
  for (const char* task : {"data.task=sort", "data.task=reverse"})
    BOOST_TEST(deck_error(test::kRandomInitDeck, {task, "data.partial_credit=true"}) == "(no error)");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.task=sort", "data.partial_credit=true", "reward.command=./score"})
                 .find("'data.partial_credit' = true (override 'data.partial_credit=true'): your own reward replaces "
                       "the task's checker") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(other_conflicts) {
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"generation.max_new_tokens=4096"}).find(
                 "max_new_tokens must be < max_total_sequence_length") != std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"data.max_prompt_tokens=5000"}).find(
                 "max_prompt_tokens must be < max_total_sequence_length") != std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"train.max_tokens_per_microbatch=1000"}).find(
                 "a micro-batch must hold the longest sequence") != std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"train.min_learning_rate=1"}).find(
                 "min_learning_rate must be <= learning_rate") != std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"loss.is_threshold_low=3"}).find(
                 "is_threshold_low must be < is_threshold_high") != std::string::npos);
  BOOST_TEST(deck_error(test::kCheckpointDeck, {"grpo.use_leave_one_out_baseline=true", "grpo.num_generations_per_prompt=1"})
                 .find("a leave-one-out baseline needs at least 2 generations per prompt") != std::string::npos);
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.min_digits=3"}) ==
             "override 'data.min_digits=3': conflicting keys 'data.min_digits' = 3 (override 'data.min_digits=3') and "
             "'data.max_digits' = 2 (default): min_digits must be <= max_digits");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"data.min_length=9"}).find("min_length must be <= max_length") !=
             std::string::npos);
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"model.max_position_embeddings=100"}).find(
                 "the model must cover the longest sequence") != std::string::npos);
}

// A system prompt without a chat format was dropped without a word: plain text prompts have no system turn.
BOOST_AUTO_TEST_CASE(a_system_prompt_needs_a_chat_format) {
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"tokenizer.chat_format=none", "tokenizer.system_prompt=Be brief."}) ==
             "override 'tokenizer.system_prompt=Be brief.': conflicting keys 'tokenizer.chat_format' = 'none' (override "
             "'tokenizer.chat_format=none') and 'tokenizer.system_prompt' = 'Be brief.' (override "
             "'tokenizer.system_prompt=Be brief.'): a system prompt needs a chat format (auto, chatml or llama3); plain "
             "text prompts have no system turn");
  BOOST_TEST(deck_error(test::kRandomInitDeck, {"tokenizer.system_prompt=Be brief."}) == "(no error)");
}

BOOST_AUTO_TEST_SUITE_END()
