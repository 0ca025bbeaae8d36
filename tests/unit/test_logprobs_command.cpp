// `hone logprobs` end to end on a tiny random model written with save_model: the HDF5 layout, values equal to
// the in-process transformer, batching invisible, and clear errors for bad input.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/paths.h"
#include "io/hdf5_file.h"
#include "transformer_test_util.h"

namespace {

struct TinyModelDir {
  hone::ModelConfig config;
  hone::ModelWeights weights;
  std::string dir;
  TinyModelDir() : config(test::tiny_config(hone::Architecture::qwen3, true)), weights(hone::allocate_weights(config)) {
    dir = test::temp_dir("logprobs_model");
    hone::init_random_weights(weights, config, 17, 0.3f);
    hone::save_model(weights, config, dir);
  }
};

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

BOOST_AUTO_TEST_SUITE(logprobs_command)

BOOST_AUTO_TEST_CASE(writes_logprobs_entropy_and_offsets) {
  TinyModelDir m;
  const std::string work = test::temp_dir("logprobs_run");
  const std::vector<std::vector<int32_t>> seqs{{1, 5, 9, 2}, {7}, {3, 3, 3, 3, 3, 3, 3}, {39, 0}};
  std::string jsonl;
  for (const auto& s : seqs) {
    jsonl += "{\"tokens\": [";
    for (size_t i = 0; i < s.size(); ++i) jsonl += (i ? "," : "") + std::to_string(s[i]);
    jsonl += "]}\n";
  }
  write_file(work + "/seqs.jsonl", jsonl + "\n");  // a trailing blank line is skipped
  for (int batch_tokens : {4, 1000}) {
    const std::string out = work + "/out" + std::to_string(batch_tokens) + ".h5";
    std::string log;
    const int rc = test::run_command(test::hone_exe() + " logprobs --model " + m.dir + " --input " + work +
                                         "/seqs.jsonl --output " + out + " --temperature 0.9 --batch-tokens " +
                                         std::to_string(batch_tokens),
                                     &log);
    BOOST_TEST_REQUIRE(rc == 0, log);
    hone::Hdf5File f(out, hone::Hdf5File::Mode::read);
    const auto lp = f.read_f32("/logprobs"), en = f.read_f32("/entropy");
    const auto off = f.read_i64("/offsets");
    BOOST_TEST(off == (std::vector<int64_t>{0, 3, 3, 9, 10}));
    BOOST_TEST_REQUIRE(lp.size() == 10u);
    BOOST_TEST_REQUIRE(en.size() == 10u);

    // The same numbers from the transformer in this process, sequence by sequence.
    hone::Transformer model(m.config, m.weights);
    double max_diff = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      model.forward(hone::PackedBatch::pack({seqs[s]}), 0.9f, true);
      for (int64_t i = off[s]; i < off[s + 1]; ++i) {
        max_diff = std::max(max_diff, double(std::fabs(model.logprobs()[i - off[s]] - lp[size_t(i)])));
        max_diff = std::max(max_diff, double(std::fabs(model.entropy()[i - off[s]] - en[size_t(i)])));
        BOOST_TEST(lp[size_t(i)] < 0.f);
      }
    }
    BOOST_TEST(max_diff < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(bad_input_is_a_user_error_naming_file_and_line) {
  TinyModelDir m;
  const std::string work = test::temp_dir("logprobs_bad");
  const std::string cmd = test::hone_exe() + " logprobs --output " + work + "/o.h5 ";
  std::string log;

  BOOST_TEST(test::run_command(cmd + "--model " + work + "/nomodel --input x.jsonl", &log) == 2);
  BOOST_TEST(log.find(work + "/nomodel") != std::string::npos, log);

  write_file(work + "/bad_json.jsonl", "{\"tokens\": [1, 2]}\n{\"tokens\": [1, 2\n");
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input " + work + "/bad_json.jsonl", &log) == 2);
  BOOST_TEST(log.find("bad_json.jsonl:2") != std::string::npos, log);

  write_file(work + "/vocab.jsonl", "{\"tokens\": [1, 2]}\n\n{\"tokens\": [1, 40]}\n");
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input " + work + "/vocab.jsonl", &log) == 2);
  BOOST_TEST(log.find("vocab.jsonl:3") != std::string::npos, log);
  BOOST_TEST(log.find("40") != std::string::npos, log);

  write_file(work + "/empty.jsonl", "{\"tokens\": []}\n");
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input " + work + "/empty.jsonl", &log) == 2);
  BOOST_TEST(log.find("empty.jsonl:1") != std::string::npos, log);

  write_file(work + "/noarray.jsonl", "{\"ids\": [1]}\n");
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input " + work + "/noarray.jsonl", &log) == 2);
  BOOST_TEST(log.find("noarray.jsonl:1") != std::string::npos, log);

  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input " + work + "/missing.jsonl", &log) == 2);
  BOOST_TEST(log.find("missing.jsonl") != std::string::npos, log);

  BOOST_TEST(test::run_command(cmd + "--model " + m.dir, &log) == 2);  // --input missing
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input a --batch-tokens 0", &log) == 2);
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input a --temperature abc", &log) == 2);
  BOOST_TEST(test::run_command(cmd + "--model " + m.dir + " --input a --temperature inf", &log) == 2);
  BOOST_TEST(log.find("--temperature must be a positive number, got inf") != std::string::npos, log);
  BOOST_TEST(!std::filesystem::exists(work + "/o.h5"));  // nothing half-written

  // --output naming a folder: refused before any work, and nothing left beside it.
  write_file(work + "/ok.jsonl", "{\"tokens\": [1, 2, 3]}\n");
  std::filesystem::create_directories(work + "/outdir");
  BOOST_TEST(test::run_command(test::hone_exe() + " logprobs --output " + work + "/outdir --model " + m.dir +
                                   " --input " + work + "/ok.jsonl",
                               &log) == 2);
  BOOST_TEST(log.find(work + "/outdir is a folder") != std::string::npos, log);
  for (const auto& e : std::filesystem::directory_iterator(work))
    BOOST_TEST(e.path().filename().string().find(".tmp") == std::string::npos, e.path().string());
}

BOOST_AUTO_TEST_SUITE_END()
