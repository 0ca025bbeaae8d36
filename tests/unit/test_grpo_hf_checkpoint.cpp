// Models from a shape and checkpoints as model folders:
//   * a folder with only config.json starts from random weights with model.init = "random" (the weights
//     `hone convert --init random` writes), and is refused, with the key to set, without it;
//   * every checkpoint holds hf/, a ready Hugging Face folder: config.json in checkpoint.dtype, the weights (bf16:
//     the fp32 master rounded; float32: the same files, linked), generation_config.json and the tokenizer's files,
//     and `hone logprobs` loads it as it loads any model folder.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "test_grpo_util.h"
#include "tokenizer/byte_level.h"

using namespace test_grpo;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string tail(const std::string& s) { return s.substr(s.size() > 2000 ? s.size() - 2000 : 0); }

// <dir>/m: config.json of a tiny Qwen3 (vocabulary 260: the byte-level tokenizer's 257 tokens fit), a
// generation_config.json, and a byte-level BPE tokenizer (256 bytes, no merges, <|endoftext|> = 256).
std::string model_folder(const std::string& dir) {
  const std::string m = dir + "/m";
  fs::create_directories(m);
  hone::ModelConfig c;
  c.arch = hone::Architecture::qwen3;
  c.vocab_size = 260;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 16;
  c.max_position_embeddings = 64;
  c.rope.head_dim = 16;
  c.rope.theta = 10000.f;
  c.qk_norm = true;
  c.tie_word_embeddings = false;
  c.eos_token_ids = {256};
  std::ofstream(m + "/config.json") << hone::model_config_to_hf_json(c);
  std::ofstream(m + "/generation_config.json") << "{\"eos_token_id\": 256, \"temperature\": 0.7}\n";
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[hone::tok::byte_level_alphabet().char_of(static_cast<unsigned char>(b))] = b;
  nlohmann::json tj = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 256}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", false}, {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                 {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                 {"merges", nlohmann::json::array()}}}};
  std::ofstream(m + "/tokenizer.json") << tj.dump();
  std::ofstream(m + "/tokenizer_config.json")
      << "{\"eos_token\": \"<|endoftext|>\", \"tokenizer_class\": \"PreTrainedTokenizerFast\", \"model_max_length\": 64}\n";
  return m;
}

std::string deck(const std::string& dir, const std::string& model) {
  return "[run]\nname = \"t\"\nseed = 11\nmax_steps = 2\n"
         "[model]\npath = \"" + model + "\"\ninit = \"random\"\ninit_std = 0.05\n"
         "[data]\ntask = \"reverse\"\nmin_length = 1\nmax_length = 2\nalphabet = \"digits\"\n"
         "[grpo]\nnum_prompts_per_step = 4\nnum_generations_per_prompt = 4\n"
         "[generation]\nmax_new_tokens = 3\nmax_total_sequence_length = 24\n"
         "[train]\nlearning_rate = 1e-3\nmax_tokens_per_microbatch = 64\n"
         "[checkpoint]\ndir = \"" + dir + "/ck\"\n"
         "[output]\ndir = \"" + dir + "/out\"\n";
}

std::string read(const std::string& path) { return file_bytes(path); }

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_hf_checkpoint)

BOOST_AUTO_TEST_CASE(a_config_json_alone_starts_from_random_weights) {
  const std::string dir = test::temp_dir("init-random");
  const std::string m = model_folder(dir);
  std::string out;
  // learning_rate 0: the checkpoint holds the initial weights.
  int rc = hone_run(write_deck(dir, deck(dir, m)), "run.max_steps=1 train.learning_rate=0", &out);
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(contains(out, m + " (its config.json; random weights)"));
  BOOST_TEST(contains(out, "random-init model of " + m + "/config.json"));
  rc = test::run_command(test::hone_exe() + " convert --model " + m + " --output " + dir +
                             "/converted --init random --seed 11 --init-std 0.05 --dtype f32",
                         &out);
  BOOST_TEST_INFO(out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(max_weight_diff(dir + "/ck/step_00000001/model.safetensors", dir + "/converted/model.safetensors") == 0.0);
  BOOST_TEST(read(dir + "/converted/tokenizer.json") == read(m + "/tokenizer.json"));
  BOOST_TEST(read(dir + "/converted/generation_config.json") == read(m + "/generation_config.json"));
  // Another seed, other weights.
  rc = test::run_command(test::hone_exe() + " convert --model " + m + " --output " + dir +
                             "/other --init random --seed 12 --init-std 0.05 --dtype f32",
                         &out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(max_weight_diff(dir + "/other/model.safetensors", dir + "/converted/model.safetensors") > 0.01);

  // Without model.init = "random" the folder needs weights: `hone run` and `hone check` say which key to set.
  const std::string pretrained = write_deck(dir, deck(dir, m) + "");
  rc = hone_run(pretrained, "model.init=pretrained model.init_std=0.02 output.overwrite=true checkpoint.overwrite=true", &out);
  BOOST_TEST(rc == 2);
  BOOST_TEST(contains(out, "no weights in it (model.safetensors or model.safetensors.index.json); set model.init = "
                           "\"random\""));
  rc = test::run_command(test::hone_exe() + " check " + pretrained + " model.init=pretrained model.init_std=0.02", &out);
  BOOST_TEST(rc == 2);
  BOOST_TEST(contains(out, "set model.init = \"random\""));
  rc = test::run_command(test::hone_exe() + " convert --model " + m + " --output " + dir + "/none", &out);
  BOOST_TEST(rc == 2);
}

BOOST_AUTO_TEST_CASE(checkpoints_hold_a_ready_hf_folder) {
  const std::string dir = test::temp_dir("hf-folder");
  const std::string m = model_folder(dir);
  std::string out;
  int rc = hone_run(write_deck(dir, deck(dir, m)), "", &out);
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string ck = dir + "/ck/step_00000002", hf = ck + "/hf";
  const auto config = nlohmann::json::parse(read(hf + "/config.json"));
  BOOST_TEST(config["torch_dtype"] == "bfloat16");
  BOOST_TEST(config["architectures"][0] == "Qwen3ForCausalLM");
  BOOST_TEST(config["vocab_size"] == 260);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"}) {
    BOOST_TEST_INFO(f);
    BOOST_TEST(read(hf + "/" + f) == read(m + "/" + f));
  }
  // The weights: bf16, the fp32 master rounded to nearest.
  hone::SafetensorsFile master(ck + "/model.safetensors"), half(hf + "/model.safetensors");
  BOOST_REQUIRE_EQUAL(master.tensors().size(), half.tensors().size());
  for (const auto& t : master.tensors()) {
    BOOST_TEST_INFO(t.name);
    BOOST_TEST(half.info(t.name).dtype_name == "BF16");
    BOOST_TEST(half.info(t.name).shape == t.shape);
    std::vector<float> a(size_t(t.numel())), b(size_t(t.numel()));
    master.read_f32(t.name, a.data());
    half.read_f32(t.name, b.data());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i]) / std::max(std::fabs(a[i]), 1e-30f)));
    BOOST_TEST(worst <= 1.0 / 256);
  }
  // A model folder like any other: hone logprobs scores sequences with it.
  std::ofstream(dir + "/seqs.jsonl") << "{\"tokens\": [49, 50, 51, 256]}\n";
  rc = test::run_command(test::hone_exe() + " logprobs --model " + hf + " --input " + dir + "/seqs.jsonl --output " +
                             dir + "/lp.h5",
                         &out);
  BOOST_TEST(rc == 0, out);

  // checkpoint.dtype = float32: the same files as the checkpoint's own weights, linked; hf_folder = false: none.
  rc = hone_run(write_deck(dir, deck(dir, m)),
                "checkpoint.dtype=float32 output.overwrite=true checkpoint.overwrite=true run.max_steps=1 checkpoint.dir=" + dir + "/ck32", &out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string ck32 = dir + "/ck32/step_00000001";
  BOOST_TEST(read(ck32 + "/hf/model.safetensors") == read(ck32 + "/model.safetensors"));
  BOOST_TEST(nlohmann::json::parse(read(ck32 + "/hf/config.json"))["torch_dtype"] == "float32");
  struct stat s1 {}, s2 {};
  BOOST_TEST((::stat((ck32 + "/hf/model.safetensors").c_str(), &s1) == 0 &&
              ::stat((ck32 + "/model.safetensors").c_str(), &s2) == 0 && s1.st_ino == s2.st_ino));
  BOOST_TEST(fs::exists(ck32 + "/hf/tokenizer.json"));
  rc = hone_run(write_deck(dir, deck(dir, m)),
                "checkpoint.hf_folder=false output.overwrite=true checkpoint.overwrite=true run.max_steps=1 checkpoint.dir=" + dir + "/cknone", &out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST(!fs::exists(dir + "/cknone/step_00000001/hf"));
  BOOST_TEST(fs::exists(dir + "/cknone/step_00000001/model.safetensors"));
}

BOOST_AUTO_TEST_SUITE_END()
