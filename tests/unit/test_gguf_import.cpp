// A GGUF model as a Hugging Face folder (model/gguf_import.h) for each architecture: random weights of a tiny config
// written here the way llama.cpp's converter lays them out (llama's q and k rows permuted, experts stacked, a tied
// embedding without output.weight, Llama 3's RoPE scaling as rope_freqs.weight), then converted: the config and every
// parameter must come back exactly. A file the config has no place for, and an unsupported architecture or RoPE
// scaling, are refused by name.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <string>
#include <vector>

#include "common/paths.h"
#include "model/gguf_file.h"
#include "model/gguf_import.h"
#include "model/weights.h"
#include "runtime/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/byte_level.h"
#include "test_grpo_util.h"
#include "transformer_test_util.h"

namespace {

using hone::Architecture;

std::string le32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string gstr(const std::string& s) { return le64(s.size()) + s; }

// A GGUF v3 file of F32 tensors, written as llama.cpp writes one.
struct Writer {
  std::vector<std::string> kvs;
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    std::vector<float> data;
  };
  std::vector<T> tensors;

  void u32(const std::string& k, uint32_t v) { kvs.push_back(gstr(k) + le32(4) + le32(v)); }
  void f32(const std::string& k, float v) {
    std::string b(4, '\0');
    std::memcpy(b.data(), &v, 4);
    kvs.push_back(gstr(k) + le32(6) + b);
  }
  void str(const std::string& k, const std::string& v) { kvs.push_back(gstr(k) + le32(8) + gstr(v)); }
  void strs(const std::string& k, const std::vector<std::string>& v) {
    std::string p = le32(8) + le64(v.size());
    for (const auto& s : v) p += gstr(s);
    kvs.push_back(gstr(k) + le32(9) + p);
  }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    std::string p = le32(5) + le64(v.size());
    for (int32_t x : v) p += le32(uint32_t(x));
    kvs.push_back(gstr(k) + le32(9) + p);
  }
  std::string bytes() const {
    std::string f = "GGUF" + le32(3) + le64(tensors.size()) + le64(kvs.size());
    for (const auto& k : kvs) f += k;
    uint64_t off = 0;
    for (const T& t : tensors) {
      f += gstr(t.name) + le32(uint32_t(t.ne.size()));
      for (uint64_t d : t.ne) f += le64(d);
      f += le32(0) + le64(off);
      off += (t.data.size() * 4 + 31) / 32 * 32;
    }
    while (f.size() % 32) f += '\0';
    for (const T& t : tensors) {
      f.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
      while (f.size() % 32) f += '\0';
    }
    return f;
  }
};

const char* gguf_arch(Architecture a) {
  switch (a) {
    case Architecture::llama: return "llama";
    case Architecture::qwen2: return "qwen2";
    case Architecture::qwen3: return "qwen3";
    case Architecture::qwen3_moe: return "qwen3moe";
  }
  return "";
}

// The GGUF name of a parameter, as llama.cpp's tensor map has it.
std::string gguf_name(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const size_t p = hf.find('.', 13);  // "model.layers.<i>."
  const std::string layer = hf.substr(13, p - 13), rest = hf.substr(p + 1);
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"self_attn.q_proj.weight", "attn_q.weight"},   {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},   {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"}, {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"}, {"mlp.gate.weight", "ffn_gate_inp.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},    {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"}};
  for (const auto& [from, to] : map)
    if (rest == from) return "blk." + layer + "." + to;
  return "";
}

// llama.cpp's permutation of q/k rows: per head, rotate-half order [2][D/2] becomes interleaved pairs [D/2][2].
std::vector<float> permute(const float* w, int64_t rows, int64_t cols, int heads) {
  const int64_t d = rows / heads, half = d / 2;
  std::vector<float> out(size_t(rows * cols));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(out.data() + (h * d + 2 * i + j) * cols, w + (h * d + j * half + i) * cols, size_t(cols) * 4);
  return out;
}

hone::ModelConfig config_of(Architecture arch, bool tied) {
  hone::ModelConfig c = test::tiny_config(arch, tied);
  c.vocab_size = 300;  // room for the 256 byte tokens of the vocabulary below
  if (arch == Architecture::qwen3_moe) {
    c.qk_norm = true;
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_intermediate_size = 12;
    c.norm_topk_prob = true;
  }
  c.bos_token_id = 256;
  c.eos_token_ids = {257};
  return c;
}

// The tiny deck's model (test_grpo_util.h) as a GGUF: qwen3, hidden 32, one layer, the character tokenizer's 101 ids.
hone::ModelConfig deck_config() {
  hone::ModelConfig c = test::tiny_config(Architecture::qwen3, true);
  c.vocab_size = 101;
  c.hidden_size = 32;
  c.intermediate_size = 64;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.rope.head_dim = 16;
  c.max_position_embeddings = 64;
  c.bos_token_id = 99;
  c.eos_token_ids = {100};
  return c;
}

// The GGUF of config c with weights w.
std::string gguf_of(const hone::ModelConfig& c, const hone::ModelWeights& w) {
  Writer g;
  const std::string a = gguf_arch(c.arch);
  g.str("general.architecture", a);
  g.u32(a + ".block_count", uint32_t(c.num_hidden_layers));
  g.u32(a + ".context_length", uint32_t(c.max_position_embeddings));
  g.u32(a + ".embedding_length", uint32_t(c.hidden_size));
  g.u32(a + ".feed_forward_length", uint32_t(c.intermediate_size));
  g.u32(a + ".attention.head_count", uint32_t(c.num_attention_heads));
  g.u32(a + ".attention.head_count_kv", uint32_t(c.num_key_value_heads));
  g.u32(a + ".attention.key_length", uint32_t(c.head_dim));
  g.u32(a + ".attention.value_length", uint32_t(c.head_dim));
  g.u32(a + ".rope.dimension_count", uint32_t(c.head_dim));
  g.f32(a + ".rope.freq_base", c.rope.theta);
  g.f32(a + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.is_moe()) {
    g.u32(a + ".expert_count", uint32_t(c.num_experts));
    g.u32(a + ".expert_used_count", uint32_t(c.num_experts_per_tok));
    g.u32(a + ".expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  }
  // A byte-level vocabulary: the byte characters (all 256 when the model's vocabulary has room), two control
  // tokens, user-defined fillers.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < std::min(256, c.vocab_size - 2); ++b) {
    tokens.push_back(hone::tok::byte_level_alphabet().char_of(static_cast<unsigned char>(b)));
    types.push_back(1);
  }
  tokens.push_back("<|begin|>");
  tokens.push_back("<|end|>");
  types.insert(types.end(), {3, 3});
  while (tokens.size() < size_t(c.vocab_size)) {
    tokens.push_back("<extra_" + std::to_string(tokens.size()) + ">");
    types.push_back(4);
  }
  g.str("tokenizer.ggml.model", "gpt2");
  g.str("tokenizer.ggml.pre", "qwen2");
  g.strs("tokenizer.ggml.tokens", tokens);
  g.i32s("tokenizer.ggml.token_type", types);
  g.strs("tokenizer.ggml.merges", {});
  g.u32("tokenizer.ggml.bos_token_id", uint32_t(c.bos_token_id));
  g.u32("tokenizer.ggml.eos_token_id", uint32_t(c.eos_token_ids[0]));
  g.str("tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}");

  if (c.rope.llama3) {  // as llama.cpp's converter writes Llama 3's scaling: a factor per frequency
    const hone::RopeParams& r = c.rope;
    g.u32(a + ".rope.scaling.original_context_length", uint32_t(r.original_max_position_embeddings));
    std::vector<float> factors;
    const double lo = r.original_max_position_embeddings / r.low_freq_factor;
    const double hi = r.original_max_position_embeddings / r.high_freq_factor;
    for (int i = 0; i < c.head_dim / 2; ++i) {
      const double wavelen = 2 * M_PI / std::pow(double(r.theta), -2.0 * i / c.head_dim);
      const double smooth = (r.original_max_position_embeddings / wavelen - r.low_freq_factor) /
                            (r.high_freq_factor - r.low_freq_factor);
      factors.push_back(wavelen < hi ? 1.f : wavelen > lo ? r.factor : float(1 / ((1 - smooth) / r.factor + smooth)));
    }
    g.tensors.push_back({"rope_freqs.weight", {uint64_t(c.head_dim / 2)}, factors});
  }
  for (const auto& [name, t] : w.named_parameters()) {
    std::vector<uint64_t> ne;
    for (auto it = t.shape().rbegin(); it != t.shape().rend(); ++it) ne.push_back(uint64_t(*it));
    const float* p = t.f32();
    std::vector<float> data(p, p + t.numel());
    if (name.find(".experts.") != std::string::npos) {  // expert e of a stacked [E, rows, cols] tensor
      const size_t e0 = name.find(".experts.") + 9, e1 = name.find('.', e0);
      const int e = std::stoi(name.substr(e0, e1 - e0));
      const std::string which = name.substr(e1 + 1, name.find('.', e1 + 1) - e1 - 1);  // gate_proj, up_proj, ...
      const std::string gname = "blk." + name.substr(13, name.find('.', 13) - 13) + ".ffn_" +
                                which.substr(0, which.find('_')) + "_exps.weight";
      if (e == 0) g.tensors.push_back({gname, {ne[0], ne[1], uint64_t(c.num_experts)}, {}});
      auto& stacked = g.tensors.back().data;
      stacked.insert(stacked.end(), data.begin(), data.end());
      continue;
    }
    if (c.arch == Architecture::llama && (name.find("q_proj.weight") != std::string::npos ||
                                          name.find("k_proj.weight") != std::string::npos)) {
      const int heads = name.find("q_proj") != std::string::npos ? c.num_attention_heads : c.num_key_value_heads;
      data = permute(p, t.shape()[0], t.shape()[1], heads);
    }
    g.tensors.push_back({gguf_name(name), ne, data});
  }
  return g.bytes();
}

// Converts bytes and checks config and weights against c and w.
void check_round_trip(const hone::ModelConfig& c, const hone::ModelWeights& w, const std::string& bytes) {
  const std::string dir = test::temp_dir("gguf_import");
  const hone::gguf::GgufFile f = hone::gguf::GgufFile::from_bytes(bytes, "tiny.gguf");
  hone::write_hf_folder_from_gguf(f, dir + "/hf", hone::DType::f32);
  const hone::ModelConfig back = hone::load_model_config(dir + "/hf");
  BOOST_TEST((back.arch == c.arch));
  BOOST_TEST(back.vocab_size == c.vocab_size);
  BOOST_TEST(back.num_hidden_layers == c.num_hidden_layers);
  BOOST_TEST(back.num_key_value_heads == c.num_key_value_heads);
  BOOST_TEST(back.head_dim == c.head_dim);
  BOOST_TEST(back.tie_word_embeddings == c.tie_word_embeddings);
  BOOST_TEST(back.attention_bias == c.attention_bias);
  BOOST_TEST(back.qk_norm == c.qk_norm);
  BOOST_TEST(back.num_experts == c.num_experts);
  BOOST_TEST(back.rope.llama3 == c.rope.llama3);
  if (c.rope.llama3) BOOST_TEST(back.rope.factor == c.rope.factor);
  BOOST_TEST(back.bos_token_id == 256);
  BOOST_TEST(back.eos_token_ids == std::vector<int>{257});
  hone::ModelWeights got = hone::allocate_weights(back);
  hone::load_weights(got, back, dir + "/hf");
  const auto want = w.named_parameters(), have = got.named_parameters();
  BOOST_TEST_REQUIRE(want.size() == have.size());
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT(want[i].first) {
      BOOST_TEST(have[i].first == want[i].first);
      BOOST_TEST_REQUIRE(have[i].second.numel() == want[i].second.numel());
      BOOST_TEST(std::memcmp(have[i].second.data(), want[i].second.data(), size_t(want[i].second.numel()) * 4) == 0);
    }
  }
  const std::unique_ptr<hone::Tokenizer> tok = hone::load_tokenizer("hf", dir + "/hf");
  BOOST_TEST(tok->vocab_size() == c.vocab_size);
  BOOST_TEST(tok->eos_id() == 257);
  BOOST_TEST(tok->is_special(256));
  BOOST_TEST(tok->encode("hi") == (std::vector<int32_t>{'h', 'i'}));
}

void expect_refused(const std::string& bytes, const std::string& needle) {
  try {
    hone::gguf_model_config(hone::gguf::GgufFile::from_bytes(bytes, "tiny.gguf"));
    BOOST_ERROR("not refused: " << needle);
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_import)

BOOST_AUTO_TEST_CASE(every_architecture_comes_back_exactly) {
  for (Architecture arch : {Architecture::llama, Architecture::qwen2, Architecture::qwen3, Architecture::qwen3_moe})
    for (bool tied : {true, false}) {
      BOOST_TEST_CONTEXT(hone::architecture_hf_name(arch) << (tied ? " tied" : " untied")) {
        const hone::ModelConfig c = config_of(arch, tied);
        hone::ModelWeights w = hone::allocate_weights(c);
        test::randomize(w, 11);
        check_round_trip(c, w, gguf_of(c, w));
      }
    }
}

BOOST_AUTO_TEST_CASE(llama3_rope_scaling_from_rope_freqs) {
  hone::ModelConfig c = config_of(Architecture::llama, true);
  c.rope.llama3 = true;
  c.rope.factor = 8.f;
  c.rope.original_max_position_embeddings = 16;  // short, so that the tiny head's frequencies span all three bands
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 12);
  check_round_trip(c, w, gguf_of(c, w));
  const hone::gguf::GgufFile f = hone::gguf::GgufFile::from_bytes(gguf_of(c, w), "tiny.gguf");
  const hone::ModelConfig back = hone::gguf_model_config(f);
  BOOST_TEST(back.rope.original_max_position_embeddings == 16);
  BOOST_TEST(back.rope.low_freq_factor == 1.f);
  BOOST_TEST(back.rope.high_freq_factor == 4.f);
  // Factors of another scaling are refused.
  hone::ModelConfig odd = c;
  odd.rope.high_freq_factor = 2.f;
  expect_refused(gguf_of(odd, w), "rope_freqs.weight is not Llama 3's frequency scaling");
}

BOOST_AUTO_TEST_CASE(what_hone_cannot_run_is_refused_by_name) {
  const hone::ModelConfig c = config_of(Architecture::qwen3, true);
  hone::ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 13);
  std::string bytes = gguf_of(c, w);
  // Another architecture.
  std::string other = bytes;
  const std::string from = gstr("general.architecture") + le32(8) + gstr("qwen3");
  const size_t at = other.find(from);
  BOOST_TEST_REQUIRE(at != std::string::npos);
  other.replace(at, from.size(), gstr("general.architecture") + le32(8) + gstr("gemma"));
  // The arch's keys are still qwen3.*: the architecture is refused first.
  try {
    hone::gguf_model_config(hone::gguf::GgufFile::from_bytes(other, "tiny.gguf"));
    BOOST_ERROR("gemma not refused");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()).find("architecture 'gemma' is not supported") != std::string::npos, e.what());
  }
  // A tensor the model has no place for (renamed from a layer's o_proj).
  std::string extra = bytes;
  const size_t t = extra.find("blk.0.attn_output.weight");
  BOOST_TEST_REQUIRE(t != std::string::npos);
  extra.replace(t, 24, "blk.0.attn_qkvout.weight");
  expect_refused(extra, "tensor blk.0.attn_qkvout.weight has no place");
}

// `hone run` with model.path naming a GGUF, on one rank and on two under mpirun (rank 0 converts while the other
// waits): each run converts once into its cache, and the two runs give the same rollouts and rewards, as the
// data-parallel equivalence of test_grpo_dp.cpp asks of a random-init model.
BOOST_AUTO_TEST_CASE(two_ranks_run_a_gguf_as_one_rank) {
  const hone::ModelConfig c = deck_config();
  hone::ModelWeights w = hone::allocate_weights(c);
  hone::init_random_weights(w, c, 5);
  const std::string dir = test::temp_dir("gguf_run");
  std::ofstream(dir + "/tiny.gguf", std::ios::binary) << gguf_of(c, w);
  std::string deck = test_grpo::tiny_deck(dir);
  const std::string shape = deck.substr(deck.find("[model]\n"), deck.find("[tokenizer]") - deck.find("[model]\n"));
  deck.replace(deck.find(shape), shape.size(), "[model]\npath = \"" + dir + "/tiny.gguf\"\n");
  std::vector<std::string> h5;
  for (const bool two : {false, true}) {
    const std::string run = dir + (two ? "/dp2" : "/dp1");
    std::filesystem::create_directories(run);
    std::string text = deck;
    for (size_t at; (at = text.find(dir + "/ck")) != std::string::npos || (at = text.find(dir + "/out")) != std::string::npos;)
      text.replace(at, dir.size(), run);
    std::string out;
    const int rc = test_grpo::hone_run(test_grpo::write_deck(run, text),
                                       "run.max_steps=2 " + std::string(test_grpo::kPolicyGradientArgs), &out,
                                       "HONE_CACHE_DIR=" + run + "/cache " +
                                           (two ? "timeout 120 mpirun -np 2 --oversubscribe --allow-run-as-root " : ""));
    BOOST_TEST_INFO(out.substr(out.size() > 1500 ? out.size() - 1500 : 0));
    BOOST_TEST_REQUIRE(rc == 0);
    size_t folders = 0, temporaries = 0;
    for (const auto& e : std::filesystem::directory_iterator(run + "/cache/gguf")) {
      ++folders;
      temporaries += e.path().filename().string().find(".tmp-") != std::string::npos;
    }
    BOOST_TEST(folders == 1u);
    BOOST_TEST(temporaries == 0u);
    h5.push_back(run + "/out/t.h5");
  }
  for (const char* m : {"accuracy", "prompt_tokens", "generated_tokens/mean", "samples"}) {
    BOOST_TEST_INFO(m);
    BOOST_TEST(test_grpo::metric(h5[0], m) == test_grpo::metric(h5[1], m));
  }
  test_grpo::check_reward_means_close(h5[0], h5[1], 1, 2);
  test_grpo::check_advantages_nonzero(h5[0], 1, 2);
}

BOOST_AUTO_TEST_SUITE_END()
