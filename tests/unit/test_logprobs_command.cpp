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

// A model no host holds (3.3e12 parameters: 13 TB in fp32) ended in `check failed: p != nullptr at
// src/tensor/tensor.cpp:64` (hone logprobs, hone convert) once a host allocation failed; a shape of a billion
// layers grew without bound. Both are refused from config.json alone, before any weight is read or allocated.
BOOST_AUTO_TEST_CASE(a_model_too_large_for_host_memory_is_refused_before_allocating) {
  const std::string work = test::temp_dir("logprobs_huge");
  hone::ModelConfig c = test::tiny_config(hone::Architecture::qwen3, true);
  c.hidden_size = 65536, c.intermediate_size = 262144, c.num_hidden_layers = 64;
  std::filesystem::create_directories(work + "/huge");
  write_file(work + "/huge/config.json", hone::model_config_to_hf_json(c));
  c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 1000000000;
  std::filesystem::create_directories(work + "/deep");
  write_file(work + "/deep/config.json", hone::model_config_to_hf_json(c));
  write_file(work + "/in.jsonl", "{\"tokens\": [1, 2, 3]}\n");
  const std::string logprobs = test::hone_exe() + " logprobs --input " + work + "/in.jsonl --output " + work +
                               "/o.h5 --model " + work;
  const std::string convert = test::hone_exe() + " convert --output " + work + "/converted --model " + work;
  std::string log;
  for (const std::string& cmd : {logprobs + "/huge", logprobs + "/huge --grad-output " + work + "/g.safetensors",
                                 convert + "/huge --init random", convert + "/huge"}) {
    BOOST_TEST_CONTEXT(cmd) {
      BOOST_TEST(test::run_command(cmd, &log) == 2);
      BOOST_TEST(log.find("host memory cannot hold the model: ") != std::string::npos, log);
      BOOST_TEST(log.find(" of its 3.299e+12 parameters") != std::string::npos, log);
      BOOST_TEST(log.find("tensor.cpp") == std::string::npos, log);
    }
  }
  BOOST_TEST(log.find("hone convert: ") != std::string::npos, log);
  BOOST_TEST(test::run_command(logprobs + "/huge --grad-output " + work + "/g.safetensors", &log) == 2);
  BOOST_TEST(log.find("needed for 2 fp32 copies of its 3.299e+12 parameters (the weights and their gradients)") !=
                 std::string::npos, log);
  for (const std::string& cmd : {logprobs + "/deep", convert + "/deep --init random"}) {
    BOOST_TEST(test::run_command(cmd, &log) == 2);
    BOOST_TEST(log.find("num_hidden_layers = 1000000000 is more than hone's limit of 16384 layers") != std::string::npos,
               log);
  }
  BOOST_TEST(!std::filesystem::exists(work + "/o.h5"));
  BOOST_TEST(!std::filesystem::exists(work + "/converted"));
}

// A NaN weight gave NaN logprobs and exit 0. The weight is named, nothing is written.
BOOST_AUTO_TEST_CASE(a_non_finite_weight_is_named_and_nothing_written) {
  TinyModelDir m;
  const auto params = m.weights.named_parameters();
  const auto& [name, t] = params[3];
  t.f32()[t.numel() / 2] = std::nanf("");
  hone::save_model(m.weights, m.config, m.dir);
  const std::string work = test::temp_dir("logprobs_nan");
  write_file(work + "/in.jsonl", "{\"tokens\": [1, 2, 3]}\n");
  std::string log;
  BOOST_TEST(test::run_command(test::hone_exe() + " logprobs --model " + m.dir + " --input " + work +
                                   "/in.jsonl --output " + work + "/o.h5", &log) == 2);
  BOOST_TEST(log.find("the weight '" + name + "' holds NaN or Inf values") != std::string::npos, log);
  BOOST_TEST(!std::filesystem::exists(work + "/o.h5"));
}

// --device cuda (and hone bench) on a machine without a usable CUDA driver or device ended in an internal CUDA
// error, exit 1. Either it runs (a GPU is there) or it says so in one line, exit 2.
BOOST_AUTO_TEST_CASE(cuda_without_a_usable_device_is_one_line_and_exit_2) {
  TinyModelDir m;
  const std::string work = test::temp_dir("logprobs_cuda");
  write_file(work + "/in.jsonl", "{\"tokens\": [1, 2, 3]}\n");
  std::string log;
  const int rc = test::run_command(test::hone_exe() + " logprobs --device cuda --model " + m.dir + " --input " + work +
                                       "/in.jsonl --output " + work + "/o.h5", &log);
  BOOST_TEST((rc == 0 || rc == 2), log);
  if (rc == 0) return;  // a GPU ran it
  BOOST_TEST(log.find("hone: error: ") == log.rfind("hone: error: "), log);
  const bool no_device = log.find("no usable CUDA device") != std::string::npos ||
                         log.find("no CUDA device is visible") != std::string::npos;
  BOOST_TEST((no_device || log.find("needs a CUDA build of hone") != std::string::npos), log);
  if (!no_device) return;  // a CPU-only build
  BOOST_TEST(test::run_command(test::hone_exe() + " bench --output-dir " + work + "/bench", &log) == 2, log);
  BOOST_TEST(log.find("hone bench: no ") != std::string::npos, log);
}

BOOST_AUTO_TEST_SUITE_END()
