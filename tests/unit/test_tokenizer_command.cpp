// `hone tokenize`: exact bytes in, ids out, and back with --decode.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "common/paths.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string write_file(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenize_command)

BOOST_AUTO_TEST_CASE(chars_encode_and_decode_round_trip) {
  const std::string dir = test::temp_dir("tokenize-chars");
  const std::string text = "<|im_start|>user\n  two spaces\ttab\n\n";  // trailing newlines must survive
  const std::string in = write_file(dir, "in.txt", text);
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --kind chars < " + in, &out) == 0);
  BOOST_TEST(out == join(hone::load_tokenizer("chars", "")->encode(text)));
  BOOST_TEST(out.rfind("1 ", 0) == 0);  // <|im_start|> is one special token
  const std::string back = dir + "/back.txt";
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --kind chars < " + in + " | " + test::hone_exe() +
                               " tokenize --kind chars --decode > " + back) == 0);
  BOOST_TEST(read_file(back) == text);
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_two) {
  const std::string dir = test::temp_dir("tokenize-bad");
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize < /dev/null", &out) == 2);
  BOOST_TEST(out.find("--tokenizer DIR is required") != std::string::npos);
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --tokenizer " + dir + " < /dev/null", &out) == 2);
  BOOST_TEST(out.find("tokenizer.json not found") != std::string::npos);
  const std::string ids = write_file(dir, "ids.txt", "5 x7 6");
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --kind chars --decode < " + ids, &out) == 2);
  BOOST_TEST(out.find("'x7' is not a token id") != std::string::npos);
  const std::string big = write_file(dir, "big.txt", "5 100000");
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --kind chars --decode < " + big, &out) == 2);
  BOOST_TEST(out.find("not in the vocabulary") != std::string::npos);
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --kind bpe < /dev/null", &out) == 2);
  BOOST_TEST(out.find("unknown tokenizer kind 'bpe'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(llama3_1_ids_and_bos, *boost::unit_test::precondition(test::needs_shared)) {
  const std::string dir = test::temp_dir("tokenize-llama");
  const std::string tokdir = test::shared_dir() + "/data/tokenizers/llama3_1";
  const std::string in = write_file(dir, "in.txt", "Hello world");
  std::string out;
  // Ids of Hugging Face tokenizers for "Hello world" (and <|begin_of_text|> = 128000).
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --tokenizer " + tokdir + " < " + in, &out) == 0);
  BOOST_TEST(out == "9906 1917\n");
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --add-special --tokenizer " + tokdir + " < " + in, &out) == 0);
  BOOST_TEST(out == "128000 9906 1917\n");
  const std::string ids = write_file(dir, "ids.txt", "128000 9906\n 1917\n");
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --decode --tokenizer " + tokdir + " < " + ids, &out) == 0);
  BOOST_TEST(out == "<|begin_of_text|>Hello world");
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --decode --skip-special --tokenizer " + tokdir + " < " + ids, &out) == 0);
  BOOST_TEST(out == "Hello world");
}

BOOST_AUTO_TEST_CASE(qwen3_special_tokens_in_text, *boost::unit_test::precondition(test::needs_shared)) {
  const std::string dir = test::temp_dir("tokenize-qwen");
  const std::string tokdir = test::shared_dir() + "/data/tokenizers/qwen3";
  const std::string text = "<|im_start|>user\nHi<|im_end|>\n";
  const std::string in = write_file(dir, "in.txt", text);
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " tokenize --tokenizer " + tokdir + " < " + in, &out) == 0);
  BOOST_TEST(out == "151644 872 198 13048 151645 198\n");  // ids of Hugging Face tokenizers
}

BOOST_AUTO_TEST_SUITE_END()
