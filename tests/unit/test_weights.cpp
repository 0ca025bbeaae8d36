// ModelWeights: names and order against checkpoints transformers wrote (tests/data/hf), the flat layout, random
// init, load/save round trips (f32 bitwise, bf16 rounding, sharded), load errors, and `hone convert`.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/paths.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "runtime/error.h"

namespace fs = std::filesystem;
using hone::DType;
using hone::Tensor;

namespace {

const std::vector<std::string> kArchs = {"llama", "qwen2", "qwen3"};

std::string golden(const std::string& arch) { return test::source_dir() + "/tests/data/hf/" + arch; }

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Writes the parameters of `w` as a checkpoint, minus `drop` and plus `extra`.
void write_edited(const hone::ModelWeights& w, const std::string& dir, const std::string& drop,
                  const std::vector<hone::SafetensorsEntry>& extra = {}) {
  std::vector<hone::SafetensorsEntry> entries;
  for (const auto& [n, t] : w.named_parameters())
    if (n != drop) entries.push_back(hone::safetensors_entry(n, t));
  entries.insert(entries.end(), extra.begin(), extra.end());
  hone::write_safetensors_checkpoint(dir, entries, int64_t(1) << 30);
}

std::string load_error(const hone::ModelConfig& c, const std::string& dir) {
  hone::ModelWeights w = hone::allocate_weights(c);
  try {
    hone::load_weights(w, c, dir);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(weights)

BOOST_AUTO_TEST_CASE(names_and_order_match_transformers) {
  for (const std::string& arch : kArchs) {
    BOOST_TEST_INFO(arch);
    const hone::ModelConfig c = hone::load_model_config(golden(arch));
    const auto params = hone::allocate_weights(c).named_parameters();
    std::vector<std::string> names;
    for (const auto& [n, t] : params) names.push_back(n);
    // The set: every tensor transformers saved, nothing more.
    hone::SafetensorsFile model(golden(arch) + "/model.safetensors");
    std::vector<std::string> saved;
    for (const auto& t : model.tensors()) saved.push_back(t.name);
    std::vector<std::string> sorted_names = names;
    std::sort(sorted_names.begin(), sorted_names.end());
    std::sort(saved.begin(), saved.end());
    BOOST_TEST(sorted_names == saved, boost::test_tools::per_element());
    // The order: transformers' named_parameters(), recorded in the reference file.
    hone::SafetensorsFile ref(golden(arch) + "/reference.safetensors");
    const auto order = nlohmann::json::parse(ref.metadata().at("parameter_order")).get<std::vector<std::string>>();
    BOOST_TEST(names == order, boost::test_tools::per_element());
    for (const auto& [n, t] : params) BOOST_TEST(t.shape() == model.info(n).shape, n);
  }
}

BOOST_AUTO_TEST_CASE(flat_buffer_layout) {
  for (const std::string& arch : kArchs) {
    BOOST_TEST_INFO(arch);
    const hone::ModelConfig c = hone::load_model_config(golden(arch));
    const hone::ModelWeights w = hone::allocate_weights(c);
    BOOST_TEST(w.flat.numel() == c.num_parameters());
    int64_t offset = 0;
    for (const auto& [n, t] : w.named_parameters()) {
      BOOST_TEST(t.f32() == w.flat.f32() + offset, n);  // contiguous, in order, no gaps
      offset += t.numel();
    }
    BOOST_TEST(offset == w.flat.numel());
    for (int64_t i = 0; i < w.flat.numel(); ++i)
      if (w.flat.f32()[i] != 0.f) BOOST_FAIL("flat buffer not zeroed");
    BOOST_TEST((w.lm_head.data() == w.embed_tokens.data()) == c.tie_word_embeddings);
    BOOST_TEST(w.lm_head.shape() == (std::vector<int64_t>{c.vocab_size, c.hidden_size}));
    BOOST_TEST(w.layers.size() == size_t(c.num_hidden_layers));
    BOOST_TEST(w.layers[1].q_bias.defined() == c.attention_bias);
    BOOST_TEST(w.layers[1].q_norm.defined() == c.qk_norm);
    BOOST_TEST(w.layers[0].o_proj.shape() == (std::vector<int64_t>{c.hidden_size, c.q_dim()}));
  }
}

BOOST_AUTO_TEST_CASE(load_goldens_bitwise) {
  for (const std::string& arch : kArchs) {
    BOOST_TEST_INFO(arch);
    const hone::ModelConfig c = hone::load_model_config(golden(arch));
    hone::ModelWeights w;  // load_weights allocates an empty one
    hone::load_weights(w, c, golden(arch));
    hone::SafetensorsFile model(golden(arch) + "/model.safetensors");
    for (const auto& [n, t] : w.named_parameters()) BOOST_TEST(same_bits(t, model.view(n)), n);
    BOOST_TEST(w.layers[0].input_layernorm.f32()[0] != 1.f);  // the goldens' norms are random, not 1
  }
}

BOOST_AUTO_TEST_CASE(save_then_load_is_bitwise_single_and_sharded) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen2"));
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, golden("qwen2"));
  for (int64_t shard : {int64_t(1) << 30, int64_t(20000)}) {
    BOOST_TEST_INFO("max_shard_bytes " << shard);
    const std::string dir = test::temp_dir("weights-save");
    hone::save_model(w, c, dir, DType::f32, shard);
    BOOST_TEST(fs::exists(dir + "/model.safetensors.index.json") == (shard < 100000));
    const hone::ModelConfig c2 = hone::load_model_config(dir);
    BOOST_TEST(c2.torch_dtype == "float32");
    BOOST_TEST(c2.num_parameters() == c.num_parameters());
    hone::ModelWeights w2 = hone::allocate_weights(c2);
    hone::load_weights(w2, c2, dir);
    BOOST_TEST(same_bits(w.flat, w2.flat));
  }
}

BOOST_AUTO_TEST_CASE(bf16_save_rounds_to_nearest_even) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen3"));
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, golden("qwen3"));
  const std::string dir = test::temp_dir("weights-bf16");
  hone::save_model(w, c, dir, DType::bf16);
  BOOST_TEST(hone::load_model_config(dir).torch_dtype == "bfloat16");
  hone::SafetensorsFile f(dir + "/model.safetensors");
  int64_t changed = 0;
  for (const auto& [n, t] : w.named_parameters()) {
    const Tensor v = f.view(n);
    BOOST_TEST(int(v.dtype()) == int(DType::bf16), n);
    for (int64_t i = 0; i < t.numel(); ++i) {
      // Reference rounding written out: add half an ulp of bf16 (minus one when the kept bit is even), truncate.
      uint32_t u;
      std::memcpy(&u, &t.f32()[i], 4);
      const uint16_t want = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
      if (v.u16()[i] != want) BOOST_FAIL(n << "[" << i << "] stored " << v.u16()[i] << ", want " << want);
      changed += (uint32_t(want) << 16) != u;
    }
  }
  BOOST_TEST(changed > 0);
  hone::ModelWeights w2 = hone::allocate_weights(c);
  hone::load_weights(w2, c, dir);
  for (int64_t i = 0; i < w.flat.numel(); ++i)
    if (w2.flat.f32()[i] != hone::bf16_to_f32(hone::f32_to_bf16(w.flat.f32()[i]))) BOOST_FAIL("bf16 load " << i);
}

BOOST_AUTO_TEST_CASE(f16_and_mixed_dtype_checkpoints_load_as_f32) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen2"));
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, golden("qwen2"));
  const std::string dir = test::temp_dir("weights-f16");
  std::vector<hone::SafetensorsEntry> entries;
  int k = 0;
  for (const auto& [n, t] : w.named_parameters())  // alternate F16, BF16, F32 tensors
    entries.push_back({n, t, k % 3 == 0 ? DType::f16 : (k % 3 == 1 ? DType::bf16 : DType::f32)}), ++k;
  hone::write_safetensors_checkpoint(dir, entries, int64_t(1) << 30);
  hone::ModelWeights w2 = hone::allocate_weights(c);
  hone::load_weights(w2, c, dir);
  k = 0;
  const auto p1 = w.named_parameters(), p2 = w2.named_parameters();
  for (size_t j = 0; j < p1.size(); ++j, ++k) {
    const Tensor &a = p1[j].second, &b = p2[j].second;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const float x = a.f32()[i];
      const float want = k % 3 == 0 ? hone::f16_to_f32(hone::f32_to_f16(x))
                                    : (k % 3 == 1 ? hone::bf16_to_f32(hone::f32_to_bf16(x)) : x);
      if (b.f32()[i] != want) BOOST_FAIL(p1[j].first << "[" << i << "] " << b.f32()[i] << " != " << want);
    }
  }
  BOOST_TEST(!same_bits(w.flat, w2.flat));  // the rounding happened
}

BOOST_AUTO_TEST_CASE(random_init_is_deterministic_and_shaped) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen2"));
  hone::ModelWeights a = hone::allocate_weights(c), b = hone::allocate_weights(c), d = hone::allocate_weights(c);
  hone::init_random_weights(a, c, 42);
  hone::init_random_weights(b, c, 42);
  hone::init_random_weights(d, c, 43);
  BOOST_TEST(same_bits(a.flat, b.flat));
  BOOST_TEST(!same_bits(a.flat, d.flat));
  for (int64_t i = 0; i < c.hidden_size; ++i) {
    BOOST_TEST(a.layers[1].input_layernorm.f32()[i] == 1.f);
    BOOST_TEST(a.norm.f32()[i] == 1.f);
  }
  for (int64_t i = 0; i < a.layers[0].q_bias.numel(); ++i) BOOST_TEST(a.layers[0].q_bias.f32()[i] == 0.f);
  // Sample moments of the largest matrices, N(0, 0.02^2): 2k-3k draws put them 4 standard errors inside these bounds.
  for (const Tensor& t : {a.embed_tokens, a.layers[0].gate_proj, a.lm_head}) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) s += t.f32()[i], s2 += double(t.f32()[i]) * t.f32()[i];
    const double mean = s / double(t.numel()), sd = std::sqrt(s2 / double(t.numel()) - mean * mean);
    BOOST_TEST(std::abs(mean) < 0.002);
    BOOST_TEST(std::abs(sd - 0.02) < 0.001);
  }
  BOOST_TEST(!same_bits(a.embed_tokens, a.lm_head.reshape(a.embed_tokens.shape())));  // untied: own draws
  hone::ModelWeights e = hone::allocate_weights(c);
  hone::init_random_weights(e, c, 42, 0.5f);
  for (int i = 0; i < 16; ++i)  // std scales the same draws
    BOOST_TEST(e.layers[0].up_proj.f32()[i] == 25.f * a.layers[0].up_proj.f32()[i], boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(load_errors_name_the_tensor) {
  const hone::ModelConfig c = hone::load_model_config(golden("qwen3"));
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, golden("qwen3"));

  std::string dir = test::temp_dir("weights-missing");
  write_edited(w, dir, "model.layers.1.self_attn.k_norm.weight");
  std::string msg = load_error(c, dir);
  BOOST_TEST(msg.find("lacks 1 tensor(s)") != std::string::npos, msg);
  BOOST_TEST(msg.find("model.layers.1.self_attn.k_norm.weight") != std::string::npos, msg);

  dir = test::temp_dir("weights-extra");
  Tensor junk = Tensor::zeros({3});
  write_edited(w, dir, "", {hone::safetensors_entry("model.layers.0.self_attn.o_proj.bias", junk)});
  msg = load_error(c, dir);
  BOOST_TEST(msg.find("does not use: model.layers.0.self_attn.o_proj.bias") != std::string::npos, msg);

  dir = test::temp_dir("weights-shape");
  std::vector<hone::SafetensorsEntry> entries;
  Tensor wrong = Tensor::zeros({c.hidden_size + 1});
  for (const auto& [n, t] : w.named_parameters())
    entries.push_back(hone::safetensors_entry(n, n == "model.norm.weight" ? wrong : t));
  hone::write_safetensors_checkpoint(dir, entries, int64_t(1) << 30);
  msg = load_error(c, dir);
  BOOST_TEST(msg.find("'model.norm.weight' has shape [33] but the config needs [32]") != std::string::npos, msg);

  dir = test::temp_dir("weights-shard");
  hone::save_model(w, c, dir, DType::f32, 30000);
  std::string second;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("model-00002-of-", 0) == 0) second = e.path().filename().string();
  BOOST_REQUIRE(!second.empty());
  fs::remove(dir + "/" + second);
  msg = load_error(c, dir);
  BOOST_TEST(msg.find(second + " is missing") != std::string::npos, msg);

  // Another architecture's checkpoint: its extra and missing tensors are named.
  msg = load_error(c, golden("qwen2"));
  BOOST_TEST(msg.find("lacks") != std::string::npos, msg);
  BOOST_TEST(msg.find("q_norm.weight") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(tied_checkpoint_may_also_hold_lm_head) {
  const hone::ModelConfig c = hone::load_model_config(golden("llama"));
  BOOST_REQUIRE(c.tie_word_embeddings);
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::load_weights(w, c, golden("llama"));
  const std::string dir = test::temp_dir("weights-tied-lm-head");
  write_edited(w, dir, "", {hone::safetensors_entry("lm_head.weight", w.embed_tokens)});
  fs::copy_file(golden("llama") + "/config.json", dir + "/config.json");
  hone::ModelWeights w2 = hone::allocate_weights(c);
  hone::load_weights(w2, c, dir);
  BOOST_TEST(same_bits(w.flat, w2.flat));
  // Untied, the same checkpoint lacks nothing but has lm_head where the config wants one: it loads too.
  hone::ModelConfig untied = c;
  untied.tie_word_embeddings = false;
  hone::ModelWeights w3 = hone::allocate_weights(untied);
  hone::load_weights(w3, untied, dir);
  BOOST_TEST(same_bits(w3.lm_head, w.embed_tokens));
}

BOOST_AUTO_TEST_CASE(convert_command_rewrites_a_checkpoint) {
  const std::string out = test::temp_dir("convert") + "/out";
  std::string log;
  BOOST_TEST(test::run_command(test::hone_exe() + " convert --model " + golden("qwen3") + " --output " + out, &log) ==
             0, log);
  hone::SafetensorsFile src(golden("qwen3") + "/model.safetensors"), dst(out + "/model.safetensors");
  BOOST_TEST(dst.tensors().size() == src.tensors().size());
  for (const auto& t : src.tensors()) BOOST_TEST(same_bits(src.view(t.name), dst.view(t.name)), t.name);
  BOOST_TEST(hone::load_model_config(out).num_parameters() == hone::load_model_config(golden("qwen3")).num_parameters());

  // Refuses to write into a non-empty folder.
  BOOST_TEST(test::run_command(test::hone_exe() + " convert --model " + golden("qwen3") + " --output " + out, &log) ==
             2);
  BOOST_TEST(log.find("refusing to overwrite") != std::string::npos, log);

  // bf16 and sharded.
  const std::string out2 = test::temp_dir("convert-bf16") + "/out";
  BOOST_TEST(test::run_command(test::hone_exe() + " convert --model " + golden("llama") + " --output " + out2 +
                                   " --dtype bf16 --max-shard-size 30KB",
                               &log) == 0,
             log);
  hone::SafetensorsCheckpoint ck(out2);
  BOOST_TEST(ck.sharded());
  hone::SafetensorsFile lsrc(golden("llama") + "/model.safetensors");
  for (const auto& t : lsrc.tensors()) {
    const Tensor a = lsrc.view(t.name), b = ck.view(t.name);
    BOOST_TEST(int(b.dtype()) == int(DType::bf16));
    for (int64_t i = 0; i < a.numel(); ++i)
      if (b.u16()[i] != hone::f32_to_bf16(a.f32()[i])) BOOST_FAIL(t.name << "[" << i << "]");
  }
  BOOST_TEST(test::run_command(test::hone_exe() + " convert --model " + golden("llama") + " --output " + out2 +
                                   "-x --dtype f8",
                               &log) == 2);
  BOOST_TEST(log.find("--dtype must be f32 or bf16") != std::string::npos, log);
}

BOOST_AUTO_TEST_SUITE_END()
