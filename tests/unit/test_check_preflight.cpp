// `hone check` as the pre-flight of a run: a missing model folder, data file or weights, a model that does not match
// the deck or its weights, a layout that does not fit the ranks, bad data rows are each one error line naming the
// deck key and where it is written, all of them at once, the last lines of the output; a deck `hone run` would
// accept passes with what was found and the memory count.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {

// `hone check <deck> <args>`: exit status, output in *out.
int hone_check(const std::string& deck, const std::string& args, std::string* out) {
  return test::run_command(test::hone_exe() + " check " + deck + " " + args, out);
}

// The tiny deck with its [model] section replaced by `model` (a model folder instead of the random-init shape).
std::string deck_with_model(const std::string& dir, const std::string& model) {
  std::string deck = tiny_deck(dir);
  const size_t a = deck.find("[model]"), b = deck.find("[tokenizer]");
  return deck.substr(0, a) + model + deck.substr(b);
}

// The "hone: error: " lines of out, and whether they are its last lines.
std::vector<std::string> error_lines(const std::string& out, bool* at_end) {
  std::vector<std::string> lines;
  size_t at = out.find("hone: error: ");
  const size_t first = at;
  while (at != std::string::npos) {
    const size_t nl = out.find('\n', at);
    lines.push_back(out.substr(at + 13, nl - at - 13));
    at = out.find("hone: error: ", nl);
  }
  *at_end = first != std::string::npos && out.find('\n', out.rfind("hone: error: ")) + 1 == out.size();
  return lines;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(check_preflight)

BOOST_AUTO_TEST_CASE(refuses_a_missing_model_folder_naming_the_key_and_line) {
  const std::string dir = test::temp_dir("check-no-model");
  const std::string deck = write_deck(dir, deck_with_model(dir, "[model]\npath = \"/nonexistent/model\"\n"));
  std::string out;
  BOOST_TEST(hone_check(deck, "", &out) == 2, out);
  bool at_end = false;
  const auto errors = error_lines(out, &at_end);
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_TEST(errors[0] == deck + ":6:1: model.path = \"/nonexistent/model\": no such folder");
  BOOST_TEST(at_end);
  BOOST_TEST(out.find("ready") == std::string::npos);
  // The same deck, checked alone (a model to be copied later), is valid.
  BOOST_TEST(hone_check(deck, "--deck-only", &out) == 0, out);
}

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once) {
  const std::string dir = test::temp_dir("check-many");
  std::ofstream(dir + "/a-file") << "x";
  const std::string deck = write_deck(dir, deck_with_model(dir, "[model]\npath = \"" + dir + "/nothing\"\n"));
  std::string out;
  BOOST_TEST(hone_check(deck, "data.task=jsonl data.path=" + dir + "/none.jsonl output.dir=" + dir + "/a-file/out " +
                                  "--ranks 3",
                        &out) == 2);
  bool at_end = false;
  const auto errors = error_lines(out, &at_end);
  BOOST_TEST_INFO(out);
  BOOST_REQUIRE_EQUAL(errors.size(), 4u);
  BOOST_TEST(errors[0].find(deck + ":6:1: model.path = \"" + dir + "/nothing\": no such folder") == 0);
  BOOST_TEST(errors[1] == "override 'data.path=" + dir + "/none.jsonl': data.path = \"" + dir +
                              "/none.jsonl\": no such file");
  BOOST_TEST(errors[2].find("output.dir = \"" + dir + "/a-file/out\": its parent " + dir + "/a-file is not a folder") !=
             std::string::npos);
  BOOST_TEST(errors[3].find("3") != std::string::npos);  // 3 ranks do not divide the 4 prompts of a step
  BOOST_TEST(at_end);
}

BOOST_AUTO_TEST_CASE(the_model_must_match_the_tokenizer_the_deck_and_its_weights) {
  // The test model has 96 tokens and 128 positions: too few for the character tokenizer and the default length.
  const std::string src = test::source_dir() + "/tests/data/hf/qwen3";
  const std::string dir = test::temp_dir("check-mismatch");
  std::string out;
  BOOST_TEST(hone_check(write_deck(dir, deck_with_model(dir, "[model]\npath = \"" + src + "\"\n")),
                        "generation.max_total_sequence_length=256 train.max_tokens_per_microbatch=256", &out) == 2);
  bool at_end = false;
  auto errors = error_lines(out, &at_end);
  BOOST_TEST_INFO(out);
  BOOST_REQUIRE_EQUAL(errors.size(), 2u);
  BOOST_TEST(errors[0].find("the model's vocabulary (96 tokens) is smaller than the tokenizer's (101)") !=
             std::string::npos);
  BOOST_TEST(errors[1].find("override 'generation.max_total_sequence_length=256': generation.max_total_sequence_length"
                            " = 256: the model is built for 128 positions") == 0);
  BOOST_TEST(out.find("  model       " + src + ": Qwen3ForCausalLM: 2 layers, hidden 32") != std::string::npos);

  // A config.json whose shapes the weights do not have; a folder without weights.
  const std::string bad = dir + "/model";
  fs::create_directories(bad);
  fs::copy_file(src + "/model.safetensors", bad + "/model.safetensors");
  std::ifstream in(src + "/config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  config.replace(config.find("\"intermediate_size\": 64"), 23, "\"intermediate_size\": 96");
  std::ofstream(bad + "/config.json") << config;
  const std::string deck = write_deck(dir, deck_with_model(dir, "[model]\npath = \"" + bad + "\"\n"));
  BOOST_TEST(hone_check(deck, "", &out) == 2);
  errors = error_lines(out, &at_end);
  BOOST_TEST(out.find("model.layers.0.mlp.gate_proj.weight has shape [64, 32] in the weights but config.json makes it "
                      "[96, 32]") != std::string::npos, out);
  fs::remove(bad + "/model.safetensors");
  BOOST_TEST(hone_check(deck, "", &out) == 2);
  BOOST_TEST(out.find("no model.safetensors (or model.safetensors.index.json) in it") != std::string::npos, out);
}

// A run this machine's memory cannot hold (a random-init model of 55 billion parameters on the CPU): `hone check`
// refuses it with `hone run`'s own message, the keys to change in it, exit 2; and says it once.
BOOST_AUTO_TEST_CASE(refuses_what_hone_run_refuses_for_memory) {
  const std::string dir = test::temp_dir("check-memory");
  const std::string deck = write_deck(dir);
  const std::string big = "model.hidden_size=8192 model.intermediate_size=28672 model.num_layers=64 "
                          "model.num_attention_heads=64 model.num_key_value_heads=8 model.head_dim=128";
  std::string out, run_out;
  BOOST_TEST(hone_check(deck, big, &out) == 2, out);
  bool at_end = false;
  const auto errors = error_lines(out, &at_end);
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_TEST(errors[0].find("host memory cannot hold this run: ") == 0, errors[0]);
  BOOST_TEST(errors[0].find("To fit: parallel.tp = 2") != std::string::npos, errors[0]);
  BOOST_TEST(out.find("ready") == std::string::npos);
  BOOST_TEST(test::run_command(test::hone_exe() + " run " + deck + " " + big, &run_out) == 2, run_out);
  const auto run_errors = error_lines(run_out, &at_end);
  BOOST_REQUIRE_EQUAL(run_errors.size(), 1u);
  // The same words after the available memory, which the two reads may see differently.
  auto tail = [](const std::string& e) { return e.substr(e.find(" available (")); };
  BOOST_TEST(tail(run_errors[0]) == tail(errors[0]));
}

// A batch that the data-parallel ranks do not divide: one line, where the key is written.
BOOST_AUTO_TEST_CASE(a_batch_the_ranks_do_not_divide_is_said_once_with_its_place) {
  const std::string dir = test::temp_dir("check-divide");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_TEST(hone_check(deck, "grpo.num_prompts_per_step=3 train.global_batch_size=3 --ranks 2", &out) == 2, out);
  bool at_end = false;
  const auto errors = error_lines(out, &at_end);
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_TEST(errors[0] == "override 'grpo.num_prompts_per_step=3': grpo.num_prompts_per_step = 3 does not divide over "
                          "2 data-parallel ranks (make it a multiple of 2)");
}

BOOST_AUTO_TEST_CASE(a_deck_hone_run_accepts_passes_with_the_layout_and_memory) {
  // A checkpoint of a one-step run is a model folder of the tiny deck's shape.
  const std::string first = test::temp_dir("check-first");
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(first), "run.max_steps=1"), 0);
  const std::string dir = test::temp_dir("check-pass");
  const std::string deck =
      write_deck(dir, deck_with_model(dir, "[model]\npath = \"" + first + "/ck/step_00000001\"\n"));
  std::string out;
  BOOST_TEST(hone_check(deck, "--ranks 2 parallel.tp=2", &out) == 0, out);
  BOOST_TEST(out.find("hone check " + deck + " for 2 ranks\n") == 0, out);
  BOOST_TEST(out.find("every tensor's shape as config.json says") != std::string::npos);
  BOOST_TEST(out.find("  tokenizer   built-in characters: 101 tokens") != std::string::npos);
  BOOST_TEST(out.find("  data        built-in task reverse") != std::string::npos);
  BOOST_TEST(out.find("  layout      2 ranks: dp 1 x tp 2 x pp 1, run.device = cpu") != std::string::npos);
  BOOST_TEST(out.find("  memory      per rank (run.device = cpu: host memory, fp32), at least: ") != std::string::npos);
  BOOST_TEST(out.find(" on rank 0 while it writes a checkpoint; this machine has ") != std::string::npos);
  BOOST_TEST(out.find("ready: `hone run " + deck + "` passes these checks on 2 ranks\n") != std::string::npos);
  // Nothing was created: the output and checkpoint folders are the run's to make.
  BOOST_TEST(!fs::exists(dir + "/out"));
  BOOST_TEST(!fs::exists(dir + "/ck"));
  // A tp that does not divide the model's 2 heads is refused; so is a pipeline split its one layer does not allow.
  BOOST_TEST(hone_check(deck, "--ranks 4 parallel.tp=4", &out) == 2);
  BOOST_TEST(out.find("parallel.tp = 4 does not divide") != std::string::npos, out);
  BOOST_TEST(hone_check(deck, "--ranks 2 parallel.pp=2", &out) == 2);
  BOOST_TEST(out.find("cannot be split evenly over 2 pipeline chunks") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(the_first_rows_of_the_data_must_parse) {
  const std::string dir = test::temp_dir("check-data");
  std::ofstream(dir + "/d.jsonl") << "{\"prompt\": \"1+1=\", \"answer\": \"2\"}\n{\"prompt\": 3, \"answer\": \"x\"}\n";
  const std::string deck = write_deck(dir);
  std::string out;
  const std::string data = "data.task=jsonl data.path=" + dir + "/d.jsonl";
  BOOST_TEST(hone_check(deck, data, &out) == 2);
  BOOST_TEST(out.find(dir + "/d.jsonl:2: field 'prompt' must be a string or a list of messages") != std::string::npos,
             out);
  BOOST_TEST(hone_check(deck, data + " data.skip_bad_lines=true", &out) == 0, out);
  BOOST_TEST(out.find("the first 1 rows parse (prompt, answer), 1 bad lines skipped") != std::string::npos, out);
}

// `hone check` once said "ready" for a template hone run refuses ({% macro %}), one that fails when rendered
// ({{ 1/0 }}) or never ends, and tokenizer.chat_format = "llama3" on a tokenizer without Llama 3's special tokens.
// It now resolves the chat format as hone run does: one line naming tokenizer.chat_format and the template.
BOOST_AUTO_TEST_CASE(the_chat_template_is_rendered_and_the_chat_format_checked) {
  const std::string dir = test::temp_dir("check-chat");
  const std::string tok = dir + "/tok";
  fs::create_directories(tok);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(test::source_dir() + "/tests/fuzz/data/tokenizer/" + f, tok + "/" + f);
  const std::string deck = write_deck(dir);
  const std::string args = "tokenizer.kind=hf tokenizer.path=" + tok;
  struct Case {
    std::string tpl, args, message;
  };
  const std::vector<Case> cases = {
      {"{% macro f() %}{% endmacro %}", "", "chat template line 1: unsupported tag 'macro'"},
      {"{{ 1/0 }}", "", "chat template line 1: division by zero"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "",
       "million steps of work for one conversation"},
      {"{% for m in messages %}{{ m.content }}{% endfor %}", " tokenizer.chat_format=llama3",
       "tokenizer.chat_format = \"llama3\": the tokenizer in " + tok + " has no special token <|begin_of_text|>"},
  };
  std::string out;
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.tpl) {
      std::ofstream(tok + "/chat_template.jinja") << c.tpl;
      BOOST_TEST(hone_check(deck, args + c.args, &out) == 2, out);
      bool at_end = false;
      const std::vector<std::string> errors = error_lines(out, &at_end);
      BOOST_TEST_REQUIRE(errors.size() == 1u, out);
      BOOST_TEST(errors[0].find("tokenizer.chat_format: ") != std::string::npos, errors[0]);
      BOOST_TEST(errors[0].find(c.message) != std::string::npos, errors[0]);
    }
  }
  std::ofstream(tok + "/chat_template.jinja")
      << "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
         "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  BOOST_TEST(hone_check(deck, args, &out) == 0, out);
  BOOST_TEST(out.find("warning") == std::string::npos, out);
  // A template without a generation prompt or an end-of-turn token works, said once each.
  std::ofstream(tok + "/chat_template.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}";
  BOOST_TEST(hone_check(deck, args, &out) == 0, out);
  BOOST_TEST(out.find("chat_template.jinja: the chat template writes no generation prompt") != std::string::npos, out);
  BOOST_TEST(out.find("chat_template.jinja: the chat template ends an assistant turn with no special token") !=
                 std::string::npos, out);
}

// A folder as data.path was "no such file"; validation.path = data.path passed without a word.
BOOST_AUTO_TEST_CASE(a_folder_as_data_path_and_validation_on_the_training_data_are_named) {
  const std::string dir = test::temp_dir("check-data-folder");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_TEST(hone_run(deck, "data.task=jsonl data.path=" + dir, &out) == 2, out);
  BOOST_TEST(out.find("data.path = \"" + dir + "\": a folder, not a JSONL file") != std::string::npos, out);
  std::ofstream(dir + "/d.jsonl") << "{\"prompt\": \"12\", \"answer\": \"21\"}\n";
  const std::string data = dir + "/d.jsonl";
  BOOST_TEST(hone_run(deck, "run.max_steps=1 data.task=jsonl data.path=" + data + " validation.path=" + data +
                                " validation.every=1",
                      &out) == 0,
             out);
  BOOST_TEST(out.find("validation.path is data.path") != std::string::npos, out);
}

// hone check neither started reward.command nor loaded reward.library: it said "ready" for a command that does not
// exist, a program that fails at once, and a plug-in whose hone_reward_create refuses its options. Now the program
// is started and watched (it must keep running, silent on stdout, until its input ends) and the plug-in loaded and
// created, as the run does; each failure is one error line naming the key and where it is written.
BOOST_AUTO_TEST_CASE(the_reward_program_is_started_and_the_plugin_loaded) {
  const std::string dir = test::temp_dir("check-reward");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_TEST(hone_check(deck, "'reward.command=exit 3'", &out) == 2, out);
  bool at_end = false;
  auto errors = error_lines(out, &at_end);
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_TEST(errors[0].find("override 'reward.command=exit 3': reward.command `exit 3` on rank 0: it closed its stdout within 2 s "
                            "of its start, before any request; the process exited with status 3") != std::string::npos,
             errors[0]);
  BOOST_TEST(hone_check(deck, "reward.command=/nonexistent/judge", &out) == 2, out);
  BOOST_TEST(out.find("the process exited with status 127") != std::string::npos, out);
  BOOST_TEST(hone_check(deck, "'reward.command=echo hello; cat'", &out) == 2, out);
  BOOST_TEST(out.find("it wrote a line nobody asked for before any request: 'hello'") != std::string::npos, out);
  BOOST_TEST(hone_check(deck, "reward.command=cat", &out) == 0, out);
  BOOST_TEST(out.find("the program `cat` (started; running after 2 s)") != std::string::npos, out);

  const std::string plugin = test::build_dir() + "/examples/libexact_match_reward.so";
  BOOST_TEST(hone_check(deck, "reward.library=" + plugin + " reward.library_options=fuzzy", &out) == 2, out);
  errors = error_lines(out, &at_end);
  BOOST_REQUIRE_EQUAL(errors.size(), 1u);
  BOOST_TEST(errors[0].find("reward.library_options = \"fuzzy\"): unknown option 'fuzzy'") != std::string::npos,
             errors[0]);
  BOOST_TEST(hone_check(deck, "reward.library=" + plugin, &out) == 0, out);
  BOOST_TEST(out.find("plug-in " + plugin + " (loaded, created and destroyed)") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
