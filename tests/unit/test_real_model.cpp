// The real model, SmolLM2-135M-Instruct from its GGUF (make deps puts it in the model cache; every case skips
// without it): `hone convert` writes a folder whose config, vocabulary, merges and chat template are the GGUF's;
// hone's fp32 logprobs of chat-formatted sequences match transformers' on the same GGUF (golden values made once by
// tools/smollm2_reference.py, tests/data/real/smollm2_logprobs.json), and its tokenizer encodes them as transformers
// does; `hone run` trains two GRPO steps on it straight from the .gguf path (through the model cache).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "common/real_model.h"
#include "io/hdf5_file.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "test_step_output_util.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

json golden() { return read_json(test::source_dir() + "/tests/data/real/smollm2_logprobs.json"); }

}  // namespace

BOOST_AUTO_TEST_SUITE(real_model)

BOOST_AUTO_TEST_CASE(convert_writes_the_models_folder, *boost::unit_test::precondition(test::needs_real_model)) {
  const std::string d = test::smollm2_folder();
  const hone::ModelConfig c = hone::load_model_config(d);
  BOOST_TEST((c.arch == hone::Architecture::llama));
  BOOST_TEST(c.hidden_size == 576);
  BOOST_TEST(c.intermediate_size == 1536);
  BOOST_TEST(c.num_hidden_layers == 30);
  BOOST_TEST(c.num_attention_heads == 9);
  BOOST_TEST(c.num_key_value_heads == 3);
  BOOST_TEST(c.head_dim == 64);
  BOOST_TEST(c.vocab_size == 49152);
  BOOST_TEST(c.max_position_embeddings == 8192);
  BOOST_TEST(c.tie_word_embeddings);
  BOOST_TEST(c.rope.theta == 100000.f);
  BOOST_TEST(!c.rope.llama3);
  BOOST_TEST(std::fabs(c.rms_norm_eps - 1e-5f) < 1e-9f);
  BOOST_TEST(c.bos_token_id == 1);
  BOOST_TEST(c.eos_token_ids == std::vector<int>{2});

  // The vocabulary and merges are the GGUF's, in its order; the chat template and special tokens travel along.
  const hone::gguf::GgufFile f(test::real_gguf_path());
  const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  const std::vector<std::string> merges = f.get_string_array("tokenizer.ggml.merges");
  const json tj = read_json(d + "/tokenizer.json");
  const json& vocab = tj.at("model").at("vocab");
  BOOST_TEST_REQUIRE(vocab.size() == tokens.size());
  size_t vocab_mismatch = 0;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!vocab.contains(tokens[i]) || vocab.at(tokens[i]).get<size_t>() != i) ++vocab_mismatch;
  BOOST_TEST(vocab_mismatch == 0u);
  const json& jm = tj.at("model").at("merges");
  BOOST_TEST_REQUIRE(jm.size() == merges.size());
  size_t merge_mismatch = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string m = jm[i].is_string() ? jm[i].get<std::string>()
                                            : jm[i][0].get<std::string>() + " " + jm[i][1].get<std::string>();
    if (m != merges[i]) ++merge_mismatch;
  }
  BOOST_TEST(merge_mismatch == 0u);
  const json tc = read_json(d + "/tokenizer_config.json");
  BOOST_TEST(tc.at("chat_template").get<std::string>() == f.get_string("tokenizer.chat_template"));
  const std::unique_ptr<hone::Tokenizer> tok = hone::load_tokenizer("hf", d);
  BOOST_TEST(tok->vocab_size() == 49152);
  BOOST_TEST(tok->id_to_token(tok->eos_id()) == "<|im_end|>");
  BOOST_TEST(tok->is_special(0));
  BOOST_TEST(tok->is_special(16));
  BOOST_TEST(!tok->is_special(17));

  // The weights load; an F32 tensor of the GGUF arrives unchanged.
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, d);
  const std::vector<float> norm = f.read_f32(*f.find_tensor("output_norm.weight"));
  BOOST_TEST_REQUIRE(w.norm.numel() == int64_t(norm.size()));
  BOOST_TEST(std::memcmp(w.norm.data(), norm.data(), norm.size() * sizeof(float)) == 0);
}

BOOST_AUTO_TEST_CASE(logprobs_match_transformers, *boost::unit_test::precondition(test::needs_real_model)) {
  const std::string d = test::smollm2_folder();
  const json g = golden();
  const std::string work = test::temp_dir("real_model_logprobs");
  const std::unique_ptr<hone::Tokenizer> tok = hone::load_tokenizer("hf", d);
  std::ofstream seqs(work + "/seqs.jsonl");
  for (const json& c : g.at("cases")) {
    // transformers' rendering of the conversation, encoded by hone: the same ids.
    const std::vector<int32_t> ids = tok->encode(c.at("text").get<std::string>());
    BOOST_TEST(ids == c.at("tokens").get<std::vector<int32_t>>(), c.at("text").get<std::string>());
    seqs << json{{"tokens", c.at("tokens")}}.dump() << "\n";
  }
  seqs.close();
  std::string log;
  const int rc = test::run_command(test::hone_exe() + " logprobs --model " + d + " --input " + work +
                                       "/seqs.jsonl --output " + work + "/lp.h5",
                                   &log);
  BOOST_TEST_REQUIRE(rc == 0, log);
  hone::Hdf5File h(work + "/lp.h5", hone::Hdf5File::Mode::read);
  const std::vector<float> lp = h.read_f32("/logprobs");
  const std::vector<int64_t> off = h.read_i64("/offsets");
  BOOST_TEST_REQUIRE(off.size() == g.at("cases").size() + 1);
  double max_diff = 0, sum_diff = 0;
  size_t n = 0;
  for (size_t s = 0; s < g.at("cases").size(); ++s) {
    const std::vector<double> ref = g.at("cases")[s].at("logprobs").get<std::vector<double>>();
    BOOST_TEST_REQUIRE(off[s + 1] - off[s] == int64_t(ref.size()));
    for (size_t i = 0; i < ref.size(); ++i) {
      const double diff = std::fabs(double(lp[size_t(off[s]) + i]) - ref[i]);
      max_diff = std::max(max_diff, diff);
      sum_diff += diff;
      ++n;
    }
  }
  BOOST_TEST_MESSAGE("hone fp32 against transformers fp32 on " << n << " tokens: max |dlogprob| " << max_diff
                                                                 << ", mean " << sum_diff / double(n));
  BOOST_TEST(max_diff < 2e-4);
  BOOST_TEST(sum_diff / double(n) < 5e-5);
}

BOOST_AUTO_TEST_CASE(two_grpo_steps_from_the_gguf, *boost::unit_test::precondition(test::needs_real_model)) {
  const std::string work = test::temp_dir("real_model_grpo");
  const std::string deck = work + "/deck.toml";
  std::ofstream(deck) << "[run]\nname = \"smollm2\"\nseed = 7\ndevice = \"cpu\"\nmax_steps = 2\n"
                         "[model]\npath = \"" << test::real_gguf_path() << "\"\n"
                         "[data]\ntask = \"jsonl\"\npath = \"" << test::source_dir()
                      << "/input/data/arithmetic-train.jsonl\"\nshuffle = false\n"
                         "[grpo]\nnum_prompts_per_step = 2\nnum_generations_per_prompt = 4\n"
                         "[generation]\ntemperature = 1.0\nmax_new_tokens = 12\nmax_total_sequence_length = 160\n"
                         "[train]\nlearning_rate = 5e-6\n"
                         "[output]\ndir = \"" << work << "/out\"\n"
                         "[checkpoint]\ndir = \"" << work << "/ck\"\nevery = 0\n";
  std::string log;
  // A cache of its own: the run converts the GGUF (model/model_source.h).
  const int rc = test::run_command("HONE_CACHE_DIR=" + work + "/cache " + test::hone_exe() + " run " + deck, &log);
  BOOST_TEST_REQUIRE(rc == 0, log);
  BOOST_TEST(log.find("converting") != std::string::npos, log);
  size_t folders = 0;
  for (const auto& e : fs::directory_iterator(work + "/cache/gguf")) folders += e.is_directory() ? 1 : 0;
  BOOST_TEST(folders == 1u);
  test_h5::File h(work + "/out/smollm2.h5");
  BOOST_TEST_REQUIRE(h.id >= 0);
  const std::vector<double> reward = test_h5::doubles(h.id, "/steps/reward/mean");
  BOOST_TEST_REQUIRE(reward.size() == 2u);
  for (double r : reward) BOOST_TEST((std::isfinite(r) && r >= 0 && r <= 1));
  const std::vector<double> tokens = test_h5::doubles(h.id, "/steps/generated_tokens/mean");
  BOOST_TEST_REQUIRE(tokens.size() == 2u);
  BOOST_TEST(tokens[0] > 0);
}

BOOST_AUTO_TEST_SUITE_END()
