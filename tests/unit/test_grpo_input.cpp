// Bad input to `hone run` stops before any work: one clear line, exit code 2, no output file or checkpoint written.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {

// Runs the tiny deck with `args`; expects exit 2, an error line holding `expect`, and nothing written.
void expect_refused(const std::string& tag, const std::string& args, const std::string& expect,
                    const std::string& deck_text = "") {
  const std::string dir = test::temp_dir("grpo-bad-" + tag);
  std::string out;
  const int rc = hone_run(write_deck(dir, deck_text), args, &out);
  BOOST_TEST_INFO(tag << ": " << out.substr(out.size() > 600 ? out.size() - 600 : 0));
  BOOST_TEST(rc == 2);
  const size_t at = out.find("hone: error: ");
  BOOST_REQUIRE(at != std::string::npos);
  const std::string line = out.substr(at, out.find('\n', at) - at);
  BOOST_TEST_INFO(line);
  BOOST_TEST(line.find(expect) != std::string::npos);
  BOOST_TEST(out.find("hone: error: ", at + 1) == std::string::npos);  // once
  BOOST_TEST(out.find('\n', at) + 1 == out.size());                     // the last line of the log
  BOOST_TEST(out.find("[grpo]") == std::string::npos);                  // no resolved deck before it
  BOOST_TEST(out.find("gen_s") == std::string::npos);                  // no step ran
  BOOST_TEST(!fs::exists(dir + "/out/t.h5"));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_input)

BOOST_AUTO_TEST_CASE(missing_model_folder) {
  // A deck naming a checkpoint folder instead of a random-init shape.
  const std::string dir = test::temp_dir("grpo-bad-model-deck");
  std::string deck = tiny_deck(dir);
  const size_t a = deck.find("[model]"), b = deck.find("[tokenizer]");
  deck.replace(a, b - a, "[model]\npath = \"/nonexistent/model\"\n");
  expect_refused("model", "", "model.path = \"/nonexistent/model\": no such folder", deck);
}

BOOST_AUTO_TEST_CASE(missing_tokenizer) {
  expect_refused("tok", "tokenizer.kind=hf tokenizer.path=/nonexistent/tok", "tokenizer.path");
}

BOOST_AUTO_TEST_CASE(missing_and_empty_dataset) {
  expect_refused("nodata", "data.task=jsonl data.path=/nonexistent/math.jsonl", "/nonexistent/math.jsonl");
  const std::string dir = test::temp_dir("grpo-empty-data");
  std::ofstream(dir + "/empty.jsonl") << "\n";
  expect_refused("emptydata", "data.task=jsonl data.path=" + dir + "/empty.jsonl", "empty.jsonl");
}

// With a system prompt the length filter once counted only the system prompt and the template, so a dataset whose
// prompts are all too long trained on nothing and exited 0. The whole rendered prompt is counted now, and a
// dataset left without prompts is refused. (System prompt + ChatML template: about 20 Qwen3 tokens; every prompt
// of math_sample.jsonl adds more than 10.)
BOOST_AUTO_TEST_CASE(every_prompt_too_long_with_a_system_prompt_is_an_error,
                     *boost::unit_test::precondition(test::needs_shared)) {
  const std::string args = "tokenizer.kind=hf tokenizer.path=" + test::shared_dir() +
                           "/data/tokenizers/qwen3 tokenizer.chat_format=chatml "
                           "'tokenizer.system_prompt=Put your final answer within \\boxed{}.' "
                           "model.vocab_size=0 data.task=jsonl data.path=" + test::source_dir() +
                           "/tests/data/rl/math_sample.jsonl generation.max_total_sequence_length=64 "
                           "train.max_tokens_per_microbatch=64 data.max_prompt_tokens=";
  // 21 tokens of system prompt and template, 31 to 40 with each prompt (the same prompts run in
  // grpo_loop/jsonl_chatml_math_reward).
  expect_refused("all-too-long", args + "28", "math_sample.jsonl: no usable prompt among");
  expect_refused("all-too-long-given", args + "28", "longer than data.max_prompt_tokens = 28)");
  // Left at 0 (or above the room), the limit is the room the generation lengths leave, and said so: the message
  // named "data.max_prompt_tokens = 24" to a user who never set it.
  const std::string room = " the room generation.max_total_sequence_length = 64 less generation.max_new_tokens = 40 "
                           "leaves)";
  expect_refused("all-too-long-unset", args + "0 generation.max_new_tokens=40",
                 "longer than 24 tokens: data.max_prompt_tokens is 0 (unset), so" + room);
  expect_refused("all-too-long-cut", args + "50 generation.max_new_tokens=40",
                 "longer than 24 tokens: data.max_prompt_tokens = 50 is cut to" + room);
}

BOOST_AUTO_TEST_CASE(batch_sizes_that_do_not_divide) {
  expect_refused("gbs", "train.global_batch_size=5", "train.global_batch_size");
}

BOOST_AUTO_TEST_CASE(model_too_short_for_the_sequence_length) {
  expect_refused("maxpos", "model.max_position_embeddings=8", "max_position_embeddings");
}

BOOST_AUTO_TEST_CASE(micro_batch_budget_below_the_sequence_length) {
  expect_refused("mbs", "train.max_tokens_per_microbatch=8", "train.max_tokens_per_microbatch");
}

// The tiny deck's one layer cannot be split over two stages: refused before the rank count is looked at, naming
// the key; a split list that does not sum to the layers likewise; generation.tp must divide the heads.
BOOST_AUTO_TEST_CASE(pipeline_split_the_layers_do_not_allow) {
  expect_refused("pp", "parallel.pp=2", "parallel.pp = 2");
  expect_refused("pp-split", "parallel.pp=2 model.num_layers=4 parallel.pp_layers=[1,2]", "parallel.pp_layers sums to 3");
  expect_refused("gen-tp", "generation.tp=3", "generation.tp = 3 does not divide the 2 attention heads");
}

BOOST_AUTO_TEST_CASE(tensor_parallel_needs_a_multiple_of_tp_ranks) {
  expect_refused("tp", "parallel.tp=2", "parallel.tp");
}

BOOST_AUTO_TEST_CASE(unwritable_output_folder) {
  if (geteuid() == 0) {
    // root writes anywhere: a file in the way of the folder does the same job.
    const std::string dir = test::temp_dir("grpo-unwritable-root");
    std::ofstream(dir + "/file") << "x";
    expect_refused("unwritable", "output.dir=" + dir + "/file/out", "output.dir");
    return;
  }
  const std::string dir = test::temp_dir("grpo-unwritable");
  fs::create_directories(dir + "/ro");
  chmod((dir + "/ro").c_str(), 0555);
  expect_refused("unwritable", "output.dir=" + dir + "/ro/out", "output.dir");
  chmod((dir + "/ro").c_str(), 0755);
}

BOOST_AUTO_TEST_CASE(existing_output_or_checkpoints_are_not_overwritten) {
  const std::string dir = test::temp_dir("grpo-exists");
  const std::string deck = write_deck(dir);
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=1"), 0);
  const std::string before = file_bytes(dir + "/out/t.h5");
  std::string out;
  BOOST_TEST(hone_run(deck, "run.max_steps=1", &out) == 2);
  BOOST_TEST(out.find("hone: error: ") != std::string::npos);
  BOOST_TEST(file_bytes(dir + "/out/t.h5") == before);
  // With only the checkpoints left, a fresh run still refuses (they are not deleted).
  fs::remove(dir + "/out/t.h5");
  BOOST_TEST(hone_run(deck, "run.max_steps=1", &out) == 2);
  BOOST_TEST(out.find("checkpoint") != std::string::npos);
  BOOST_TEST(fs::exists(dir + "/ck/step_00000001"));
  // output.overwrite=true checkpoint.overwrite=true replaces both.
  BOOST_TEST(hone_run(deck, "run.max_steps=2 output.overwrite=true checkpoint.overwrite=true", &out) == 0);
  BOOST_TEST(steps(dir + "/out/t.h5") == (std::vector<int64_t>{1, 2}));
}

BOOST_AUTO_TEST_SUITE_END()
