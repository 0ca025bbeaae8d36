// JSONL prompt datasets: parsing, errors that name file and line, dropping long prompts, shuffling per epoch,
// sharding over data-parallel ranks, cursors that resume exactly.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "common/paths.h"
#include "data/dataset_jsonl.h"
#include "reward/math_answer.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;
using namespace hone::reward;

namespace {

std::string fixture(const std::string& name) { return test::source_dir() + "/tests/data/rl/" + name; }

std::string write_file(const std::string& tag, const std::string& text) {
  std::string path = test::temp_dir(tag) + "/data.jsonl";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// n prompts "q<i>" with answers "<i>".
std::string numbered(const std::string& tag, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "{\"prompt\": \"q" + std::to_string(i) + "\", \"answer\": \"" + std::to_string(i) + "\"}\n";
  return write_file(tag, text);
}

data::DatasetOptions options_for(const std::string& path, uint64_t seed = 7) {
  DatasetOptions o;
  o.path = path;
  o.seed = seed;
  return o;
}

std::string error_of(const data::DatasetOptions& o, data::TokenCounter count = nullptr) {
  try {
    data::JsonlPromptDataset d(o, count);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

std::vector<std::string> answers(const std::vector<data::Prompt>& ps) {
  std::vector<std::string> out;
  for (const data::Prompt& p : ps) out.push_back(p.answer);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dataset_jsonl)

BOOST_AUTO_TEST_CASE(reads_string_and_chat_prompts) {
  data::DatasetOptions o = options_for(fixture("prompts.jsonl"));
  o.shuffle = false;
  data::JsonlPromptDataset d(o);
  BOOST_TEST(d.epoch_size() == 4);
  BOOST_TEST(d.stats().lines == 4);
  data::Prompt a = d.at(0), b = d.at(1), c = d.at(2);
  BOOST_TEST(a.text == "What is 2+3?");
  BOOST_TEST(a.messages.size() == 1u);
  BOOST_TEST(a.messages[0].role == "user");
  BOOST_TEST(a.answer == "5");
  BOOST_TEST(a.id == 1);
  BOOST_TEST(a.source == o.path + ":1");
  BOOST_TEST(b.messages.size() == 2u);
  BOOST_TEST(b.messages[0].role == "system");
  BOOST_TEST(b.messages[0].content == "Put the final answer in \\boxed{}.");
  BOOST_TEST(b.messages[1].content == "What is 6*7?");
  BOOST_TEST(b.text == "Put the final answer in \\boxed{}.\n\nWhat is 6*7?");
  BOOST_TEST(b.answer == "42");  // a number answer becomes its text
  BOOST_TEST(c.id == 4);         // the blank line 3 is skipped but counted in line numbers
  BOOST_TEST(c.answer == "Half of 48 is 24.\n#### 72");
}

// An integer answer past 64 bits written as a JSON number keeps its digits (the JSON library holds it as a double:
// 1.2345678901234568e+29 reached the checker, and a correct answer was judged wrong), and the checker compares it
// exactly.
BOOST_AUTO_TEST_CASE(integer_answers_past_64_bits_keep_their_digits) {
  const std::string path = write_file(
      "dataset_bigint", "{\"prompt\": \"p\", \"x\": {\"answer\": 1.5}, \"answer\": 123456789012345678901234567890}\n"
                        "{\"prompt\": \"q\", \"answer\": -340282366920938463463374607431768211457}\n"
                        "{\"prompt\": \"r\", \"answer\": 1e30}\n{\"prompt\": \"s\", \"answer\": 18446744073709551615}\n");
  data::DatasetOptions o = options_for(path);
  o.shuffle = false;
  data::JsonlPromptDataset d(o);
  BOOST_TEST(d.at(0).answer == "123456789012345678901234567890");
  BOOST_TEST(d.at(1).answer == "-340282366920938463463374607431768211457");
  BOOST_TEST(d.at(2).answer == "1e+30");  // written as a float: a float
  BOOST_TEST(d.at(3).answer == "18446744073709551615");
  BOOST_TEST(hone::reward::math_answers_equal("123456789012345678901234567890", d.at(0).answer));
  BOOST_TEST(!hone::reward::math_answers_equal("123456789012345678901234567891", d.at(0).answer));
  BOOST_TEST(hone::reward::math_answers_equal("-340282366920938463463374607431768211457", d.at(1).answer));
  BOOST_TEST(!hone::reward::math_answers_equal("-340282366920938463463374607431768211456", d.at(1).answer));
}

BOOST_AUTO_TEST_CASE(custom_field_names_and_crlf) {
  data::DatasetOptions o = options_for(fixture("custom_keys_crlf.jsonl"));
  o.prompt_key = "question";
  o.answer_key = "solution";
  o.shuffle = false;
  data::JsonlPromptDataset d(o);
  BOOST_TEST(d.epoch_size() == 2);
  BOOST_TEST(d.at(1).text == "2+2?");
  BOOST_TEST(d.at(1).answer == "4");
  o.answer_key = "answer";
  BOOST_TEST(error_of(o) == o.path + ":1: missing field 'answer'");
  o.answer_key = "";  // no answer needed
  BOOST_TEST(data::JsonlPromptDataset(o).at(0).answer == "");
}

BOOST_AUTO_TEST_CASE(malformed_lines_name_file_and_line) {
  const std::string good = "{\"prompt\": \"p\", \"answer\": \"1\"}\n";
  struct Bad {
    std::string line, message;
  };
  const std::vector<Bad> bad = {
      {"{\"prompt\": \"p\"}", "missing field 'answer'"},
      {"{\"answer\": \"1\"}", "missing field 'prompt'"},
      {"{\"prompt\": \"p\", \"answer\": \"1\"", "invalid JSON"},
      {"[1, 2]", "expected a JSON object, got a list"},
      {"{\"prompt\": 5, \"answer\": \"1\"}", "field 'prompt' must be a string or a list of messages, got a number"},
      {"{\"prompt\": \"p\", \"answer\": null}", "field 'answer' must be a string or a number, got null"},
      {"{\"prompt\": [{\"role\": \"user\"}], \"answer\": \"1\"}", "message 0 needs a string 'content'"},
      {"{\"prompt\": [{\"role\": \"robot\", \"content\": \"x\"}], \"answer\": \"1\"}", "has role 'robot'"},
      {"{\"prompt\": [], \"answer\": \"1\"}", "is an empty list of messages"},
      {"{\"prompt\": \"  \", \"answer\": \"1\"}", "field 'prompt' is empty"},
      // 100,000 levels in an extra field once overflowed the stack copying the row's extra fields.
      {"{\"prompt\": \"p\", \"answer\": \"1\", \"e\": " + std::string(100000, '[') + std::string(100000, ']') + "}",
       "JSON nested deeper than 256 levels of [ and { (hone's limit)"},
  };
  for (const Bad& b : bad) {
    std::string path = write_file("dataset_bad", good + good + b.line + "\n" + good);
    std::string err = error_of(options_for(path));
    BOOST_TEST((err.find(path + ":3: ") == 0 && err.find(b.message) != std::string::npos),
               "line [" << b.line << "] gave [" << err << "]");
    // With skip_bad_lines the line is skipped and counted.
    data::DatasetOptions o = options_for(path);
    o.skip_bad_lines = true;
    data::JsonlPromptDataset d(o);
    BOOST_TEST(d.epoch_size() == 3);
    BOOST_TEST(d.stats().bad_lines == 1);
  }
}

BOOST_AUTO_TEST_CASE(empty_or_unusable_files_are_user_errors) {
  BOOST_TEST(error_of(options_for(write_file("dataset_empty", ""))).find("no prompts (the file is empty)") !=
             std::string::npos);
  BOOST_TEST(error_of(options_for(write_file("dataset_blank", "\n  \n"))).find("no prompts") != std::string::npos);
  data::DatasetOptions o = options_for(write_file("dataset_allbad", "nope\n{}\n"));
  o.skip_bad_lines = true;
  BOOST_TEST(error_of(o).find("no usable prompt among 2 lines (2 malformed") != std::string::npos);
  BOOST_TEST(error_of(options_for("/nonexistent/data.jsonl")).find("cannot open") == 0);
  BOOST_TEST(error_of(options_for("")).find("data.path is empty") == 0);
}

BOOST_AUTO_TEST_CASE(long_prompts_are_dropped_and_counted) {
  std::string path = write_file("dataset_long",
                                "{\"prompt\": \"short\", \"answer\": \"1\"}\n"
                                "{\"prompt\": \"this one is much too long\", \"answer\": \"2\"}\n"
                                "{\"prompt\": \"tiny\", \"answer\": \"3\"}\n");
  data::DatasetOptions o = options_for(path);
  o.max_prompt_tokens = 5;
  o.shuffle = false;
  data::TokenCounter chars = [](const Prompt& p) { return static_cast<int64_t>(p.text.size()); };
  data::JsonlPromptDataset d(o, chars);
  BOOST_TEST(d.epoch_size() == 2);
  BOOST_TEST(d.stats().too_long == 1);
  BOOST_TEST(d.stats().longest_prompt_tokens == 5);
  BOOST_TEST(d.at(1).text == "tiny");  // never truncated: the long one is gone, the others are whole
  BOOST_TEST(d.describe().find("1 over 5 tokens dropped") != std::string::npos);
  o.max_prompt_tokens = 3;
  BOOST_TEST(error_of(o, chars).find("3 longer than data.max_prompt_tokens = 3") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(each_epoch_is_a_seeded_permutation) {
  std::string path = numbered("dataset_shuffle", 20);
  data::JsonlPromptDataset a(options_for(path, 1)), b(options_for(path, 1)), c(options_for(path, 2));
  std::vector<int64_t> e0 = a.epoch_order(0), e1 = a.epoch_order(1);
  BOOST_TEST(e0 == b.epoch_order(0));
  BOOST_TEST(e0 != e1);
  BOOST_TEST(e0 != c.epoch_order(0));
  for (const auto& e : {e0, e1}) {
    std::vector<int64_t> sorted = e;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 20; ++i) BOOST_TEST(sorted[i] == i);
  }
  // One epoch of steps yields every prompt exactly once, in the permutation's order.
  std::vector<std::string> got;
  for (int s = 0; s < 4; ++s)
    for (auto& x : answers(a.next_batch(5))) got.push_back(x);
  for (int i = 0; i < 20; ++i) BOOST_TEST(got[i] == std::to_string(e0[i]));
  BOOST_TEST(a.cursor().epoch == 1);
  BOOST_TEST(a.cursor().position == 0);
  // Without shuffling: file order every epoch.
  data::DatasetOptions o = options_for(path);
  o.shuffle = false;
  data::JsonlPromptDataset plain(o);
  BOOST_TEST(answers(plain.next_batch(3)) == (std::vector<std::string>{"0", "1", "2"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(steps_roll_over_epochs) {
  std::string path = numbered("dataset_roll", 7);
  data::DatasetOptions o = options_for(path);
  o.shuffle = false;
  data::JsonlPromptDataset d(o);
  d.next_batch(5);
  std::vector<std::string> second = answers(d.next_batch(5));
  BOOST_TEST(second == (std::vector<std::string>{"5", "6", "0", "1", "2"}), boost::test_tools::per_element());
  BOOST_TEST(d.cursor().epoch == 1);
  BOOST_TEST(d.cursor().position == 3);
  // A step larger than the dataset spans several epochs.
  d.next_batch(16);
  BOOST_TEST(d.cursor().epoch == 3);
  BOOST_TEST(d.cursor().position == 5);
}

BOOST_AUTO_TEST_CASE(shards_over_ranks_union_to_the_single_rank_stream) {
  std::string path = numbered("dataset_shard", 13);
  for (int world : {1, 2, 3, 4, 8}) {
    for (int64_t per_step : {4, 5, 8}) {
      data::JsonlPromptDataset single(options_for(path));
      std::vector<std::unique_ptr<data::JsonlPromptDataset>> ranks;
      for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<data::JsonlPromptDataset>(options_for(path)));
      for (int step = 0; step < 6; ++step) {
        std::vector<std::string> want = answers(single.next_batch(per_step)), got;
        for (int r = 0; r < world; ++r) {
          std::vector<std::string> part = answers(ranks[r]->next_batch(per_step, r, world));
          data::ShardRange sr = shard_range(per_step, r, world);
          BOOST_TEST(static_cast<int64_t>(part.size()) == sr.end - sr.begin);
          got.insert(got.end(), part.begin(), part.end());
          BOOST_TEST(ranks[r]->save_cursor() == single.save_cursor());
        }
        BOOST_TEST(got == want, "world " << world << " per_step " << per_step << " step " << step);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cursor_restores_exactly) {
  std::string path = numbered("dataset_cursor", 11);
  data::JsonlPromptDataset a(options_for(path));
  a.next_batch(4);
  a.next_batch(4);
  a.next_batch(4);  // into epoch 1
  std::string saved = a.save_cursor();
  BOOST_TEST(saved == "{\"epoch\":1,\"epoch_size\":11,\"position\":1}");
  std::vector<std::string> after = answers(a.next_batch(6));
  data::JsonlPromptDataset b(options_for(path));
  b.restore_cursor(saved);
  BOOST_TEST(answers(b.next_batch(6)) == after);
  BOOST_TEST(b.save_cursor() == a.save_cursor());
  data::DataCursor c = DataCursor::parse("{\"epoch\": 3, \"position\": 2}");
  BOOST_TEST(c.epoch == 3);
  BOOST_TEST(c.position == 2);
  BOOST_TEST(c.epoch_size == -1);
  BOOST_CHECK_THROW(data::DataCursor::parse("epoch 3"), hone::UserError);
  BOOST_CHECK_THROW(data::DataCursor::parse("{\"epoch\": -1, \"position\": 0}"), hone::UserError);
  BOOST_CHECK_THROW(data::DataCursor::parse("{\"epoch\": \"1\", \"position\": 0}"), hone::UserError);
  // A broken cursor from a checkpoint is named on one line, its line breaks escaped.
  try {
    data::DataCursor::parse("{\"epoch\":0,\nposition\":6}");
    BOOST_FAIL("a broken cursor was accepted");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find('\n') == std::string::npos, e.what());
    BOOST_TEST(std::string(e.what()).find("\\n") != std::string::npos, e.what());
  }
  // A cursor saved from a different dataset is refused rather than silently misread.
  data::JsonlPromptDataset smaller(options_for(numbered("dataset_cursor2", 5)));
  BOOST_CHECK_THROW(smaller.restore_cursor(saved), hone::UserError);
  BOOST_CHECK_THROW(smaller.restore_cursor("{\"epoch\":0,\"position\":9}"), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()
