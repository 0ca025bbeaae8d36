// Resuming against a changed deck (rl/resume_deck.h): keys a checkpoint cannot carry (model, tokenizer, data and its
// order, seed) are refused with the key and where it is set, before the output file is touched; keys that may change
// (learning rate, max_steps, output, logging, the parallel layout) are accepted, listed, and written to the output
// file's resume history. Input paths are compared by content: a moved dataset is accepted, a different dataset of
// the same length behind the same path is refused.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "rl/resume_deck.h"
#include "runtime/error.h"
#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {

hone::Config deck(const std::vector<std::string>& overrides) {
  return hone::load_config_from_string(tiny_deck("/tmp/resume-deck"), "deck.toml", overrides);
}

// The refusal of resuming `now` from a checkpoint of `then` ("" when accepted), and the accepted changes.
std::string refusal(const hone::Config& then, const hone::Config& now, std::vector<std::string>* accepted = nullptr) {
  try {
    const auto a = hone::rl::compare_resume_deck(now, hone::rl::record_deck(now), hone::rl::record_deck(then), "ck/step_00000002");
    if (accepted) *accepted = a;
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string resume_history(const std::string& h5) {
  test_h5::File f(h5);
  return f.id < 0 ? std::string() : test_h5::string_attr(f.id, ".", "resume_history");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resume_deck)

BOOST_AUTO_TEST_CASE(keys_are_refused_or_accepted_by_what_a_checkpoint_carries) {
  using hone::rl::resume_refusal_reason;
  for (const char* k : {"model.hidden_size", "model.path", "model.init_std", "tokenizer.chat_format",
                        "tokenizer.system_prompt", "data.task", "data.path", "data.shuffle", "data.max_digits",
                        "grpo.num_prompts_per_step", "grpo.num_generations_per_prompt", "run.seed"})
    BOOST_TEST(!resume_refusal_reason(k).empty(), k);
  // Checkpoints are whole and independent of tp/dp/pp: the layout may change. So may the rest.
  for (const char* k : {"train.learning_rate", "run.max_steps", "output.dir", "run.log_level", "checkpoint.every",
                        "parallel.tp", "parallel.pp", "train.distributed_optimizer", "loss.kl_coef",
                        "generation.temperature", "grpo.normalize_rewards", "run.device"})
    BOOST_TEST(resume_refusal_reason(k).empty(), k);
}

BOOST_AUTO_TEST_CASE(changes_are_listed_or_refused_with_the_key_and_where_it_is_set) {
  const hone::Config then = deck({});
  std::vector<std::string> accepted;
  BOOST_TEST(refusal(then, deck({"run.resume=auto"}), &accepted) == "");
  BOOST_TEST(accepted.empty());  // run.resume itself is not a change
  BOOST_TEST(refusal(then, deck({"train.learning_rate=1e-3", "run.max_steps=9", "parallel.tp=2"}), &accepted) == "");
  BOOST_TEST(accepted == (std::vector<std::string>{"run.max_steps 4 -> 9", "train.learning_rate 0.003 -> 0.001",
                                                   "parallel.tp 1 -> 2"}),
             boost::test_tools::per_element());
  const std::string m = refusal(then, deck({"grpo.num_generations_per_prompt=8", "data.task=sort", "run.max_steps=9"}));
  BOOST_TEST_MESSAGE(m);
  BOOST_TEST(m.find("cannot resume from ck/step_00000002: the deck changes keys a checkpoint cannot carry: ") == 0u);
  BOOST_TEST(has(m, "data.task = \"sort\" (override 'data.task=sort'), was \"reverse\" (the data order)"));
  BOOST_TEST(has(m, "grpo.num_generations_per_prompt = 8 (override 'grpo.num_generations_per_prompt=8'), was 4 (the data order)"));
  BOOST_TEST(!has(m, "max_steps"));
  BOOST_TEST(has(m, "Set them back, or start a new run"));
  // The location of a key set in the deck file.
  std::string text = tiny_deck("/tmp/resume-deck");
  text.insert(text.find("kind = \"chars\"\n") + 15, "chat_format = \"chatml\"\n");
  const hone::Config other = hone::load_config_from_string(text, "deck.toml");
  BOOST_TEST(has(refusal(then, other), "tokenizer.chat_format = \"chatml\" (deck.toml:"));
}

BOOST_AUTO_TEST_CASE(a_record_without_a_key_means_its_default_and_a_damaged_record_is_one_line) {
  const hone::Config then = deck({});
  hone::rl::DeckRecord old = hone::rl::record_deck(then);
  old.values.erase("data.shuffle");  // a checkpoint of an older hone: the key did not exist (default true)
  BOOST_TEST(hone::rl::compare_resume_deck(then, hone::rl::record_deck(then), old, "ck").empty());
  const hone::Config changed = deck({"data.shuffle=false"});
  BOOST_CHECK_THROW(hone::rl::compare_resume_deck(changed, hone::rl::record_deck(changed), old, "ck"), hone::UserError);
  // Round trip, and damaged files.
  const hone::rl::DeckRecord back =
      hone::rl::parse_deck_record(hone::rl::deck_record_json(hone::rl::record_deck(then)), "deck.json");
  BOOST_TEST(back.values == hone::rl::record_deck(then).values);
  BOOST_TEST(back.inputs == hone::rl::record_deck(then).inputs);
  for (const char* bad : {"", "[1]", "{\"format\": \"x\"}", "{\"format\": \"hone-deck-record-1\", \"values\": 3}",
                          "{\"format\": \"hone-deck-record-1\", \"values\": {\"a\\nb\": 1}, \"inputs\": {}}"}) {
    try {
      hone::rl::parse_deck_record(bad, "ck/deck.json");
      BOOST_ERROR("accepted " << bad);
    } catch (const hone::UserError& e) {
      BOOST_TEST(std::string(e.what()).find("ck/deck.json: ") == 0u);
      BOOST_TEST(!has(e.what(), "\n"));
    }
  }
}

// The whole path through `hone run`: a changed learning rate is listed and recorded; a changed group size is refused
// and the output file is left as it was; the dataset is judged by its content.
BOOST_AUTO_TEST_CASE(hone_run_resumes_across_allowed_changes_only) {
  const std::string dir = test::temp_dir("resume-deck");
  std::ofstream(dir + "/a.jsonl") << "{\"prompt\": \"rev:12=\", \"answer\": \"21\"}\n"
                                     "{\"prompt\": \"rev:34=\", \"answer\": \"43\"}\n"
                                     "{\"prompt\": \"rev:56=\", \"answer\": \"65\"}\n"
                                     "{\"prompt\": \"rev:78=\", \"answer\": \"87\"}\n";
  const std::string deck_path = write_deck(dir);
  const std::string data = " data.task=jsonl data.path=" + dir + "/a.jsonl";
  BOOST_REQUIRE_EQUAL(hone_run(deck_path, "run.max_steps=2" + data), 0);
  const std::string h5 = dir + "/out/t.h5";
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck_path, "run.resume=auto run.max_steps=3 train.learning_rate=1e-3" + data, &out), 0);
  BOOST_TEST(has(out, "resuming with a changed deck: changed run.max_steps 2 -> 3, train.learning_rate 0.003 -> 0.001\n"), out);
  BOOST_TEST(has(resume_history(h5), "step 2 at "));
  BOOST_TEST(has(resume_history(h5), ": changed run.max_steps 2 -> 3, train.learning_rate 0.003 -> 0.001\n"));
  BOOST_TEST(steps(h5) == (std::vector<int64_t>{1, 2, 3}));

  // Refused: the output file and the checkpoints stay as they are.
  const std::string before = file_bytes(h5);
  BOOST_TEST(hone_run(deck_path, "run.resume=auto run.max_steps=4 grpo.num_generations_per_prompt=8" + data, &out) == 2);
  BOOST_TEST(has(out, "hone: error: cannot resume from " + dir + "/ck/step_00000003: the deck changes a key a "
                      "checkpoint cannot carry: grpo.num_generations_per_prompt = 8 (override "
                      "'grpo.num_generations_per_prompt=8'), was 4 (the data order). Set it back"), out);
  BOOST_TEST((file_bytes(h5) == before));

  // Another dataset of the same length behind the same path: refused. The same dataset elsewhere: accepted.
  fs::copy_file(dir + "/a.jsonl", dir + "/moved.jsonl");
  std::string text = file_bytes(dir + "/a.jsonl");
  std::swap(text[16], text[17]);  // "rev:21=": still valid, same length
  std::ofstream(dir + "/a.jsonl", std::ios::trunc) << text;
  BOOST_TEST(hone_run(deck_path, "run.resume=auto run.max_steps=4" + data, &out) == 2);
  BOOST_TEST(has(out, "data.path = \"" + dir + "/a.jsonl\" (override 'data.path=" + dir +
                      "/a.jsonl'): the content behind it changed since the checkpoint was written (the data order)"), out);
  BOOST_TEST((file_bytes(h5) == before));
  BOOST_TEST(hone_run(deck_path, "run.resume=auto run.max_steps=4 data.task=jsonl data.path=" + dir + "/moved.jsonl",
                      &out) == 0, out);
  BOOST_TEST(has(out, "data.path \"" + dir + "/a.jsonl\" -> \"" + dir + "/moved.jsonl\" (the same content)"), out);
  BOOST_TEST(steps(h5) == (std::vector<int64_t>{1, 2, 3, 4}));
}

BOOST_AUTO_TEST_SUITE_END()
