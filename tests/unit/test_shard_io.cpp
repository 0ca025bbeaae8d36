// Tensor-parallel loading and saving of HF safetensors (parallel/shard_io.h) on one process: every rank's
// load_shard_weights at tp 1, 2 and 4 equals its extract_shard of load_weights, bitwise, for f32, bf16 and f16 files,
// single and sharded with an index, over Qwen3 (tied, q/k norm), Llama (untied), Qwen2 (biases), a vocabulary tp
// does not divide and a single KV head (replicated); at tp = 1 it is load_weights itself. Checkpoint errors are
// load_weights' own. save_model_from_shards at tp = 1 writes save_model's files. (tp = 2 saving: tests/mpi.)
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "common/paths.h"
#include "model/safetensors.h"
#include "parallel/shard_io.h"
#include "parallel/shard_weights.h"
#include "runtime/error.h"
#include "transformer_test_util.h"

namespace fs = std::filesystem;
using hone::Architecture;
using hone::DType;
using hone::ModelConfig;
using hone::ModelWeights;

namespace {

struct Model {
  std::string name;
  ModelConfig c;
};

std::vector<Model> models() {
  ModelConfig padded = test::tiny_config(Architecture::llama, false);
  padded.vocab_size = 41;  // 42 rows at tp 2, 44 at tp 4: the last rank's embedding and LM head end in padding
  ModelConfig one_kv = test::tiny_config(Architecture::qwen3, true);
  one_kv.num_key_value_heads = 1;  // replicated over the tp ranks
  return {{"qwen3", test::tiny_config(Architecture::qwen3, true)},
          {"llama", test::tiny_config(Architecture::llama, false)},
          {"qwen2", test::tiny_config(Architecture::qwen2, false)},
          {"padded-vocab", padded},
          {"one-kv-head", one_kv}};
}

bool same_bits(const ModelWeights& a, const ModelWeights& b) {
  return a.flat.numel() == b.flat.numel() && std::memcmp(a.flat.data(), b.flat.data(), a.flat.nbytes()) == 0;
}

// Writes w's parameters stored as `dtype`, as one file or sharded (small max_shard_bytes).
void write_checkpoint(const ModelWeights& w, const std::string& dir, DType dtype, bool sharded) {
  std::vector<hone::SafetensorsEntry> entries;
  for (const auto& [n, t] : w.named_parameters()) entries.push_back({n, t, dtype});
  hone::write_safetensors_checkpoint(dir, entries, sharded ? 3000 : int64_t(1) << 30);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <class F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shard_io)

BOOST_AUTO_TEST_CASE(every_rank_loads_the_slices_of_load_weights) {
  int checked = 0;
  for (const Model& m : models())
    for (DType dtype : {DType::f32, DType::bf16, DType::f16})
      for (bool sharded : {false, true}) {
        BOOST_TEST_CONTEXT(m.name << ", " << hone::dtype_name(dtype) << (sharded ? ", sharded" : "")) {
          const std::string dir = test::temp_dir("shard-io-load");
          ModelWeights w = hone::allocate_weights(m.c);
          test::randomize(w, 31);
          write_checkpoint(w, dir, dtype, sharded);
          BOOST_TEST(hone::SafetensorsCheckpoint(dir).sharded() == sharded);
          ModelWeights whole;
          hone::load_weights(whole, m.c, dir);
          for (int tp : {1, 2, 4})
            for (int r = 0; r < tp; ++r) {
              const hone::ShardLayout L = hone::ShardLayout::of(m.c, tp, r);
              ModelWeights want = hone::allocate_shard_weights(L, m.c);
              hone::extract_shard(L, whole, want);
              ModelWeights got;  // allocated by the loader
              hone::load_shard_weights(got, L, m.c, dir);
              BOOST_TEST(same_bits(got, want), "tp " << tp << " rank " << r);
              if (tp == 1) BOOST_TEST(same_bits(got, whole));
              ++checked;
            }
        }
      }
  BOOST_TEST(checked == 5 * 3 * 2 * 7);
}

BOOST_AUTO_TEST_CASE(loading_into_given_weights_overwrites_every_element) {
  const ModelConfig c = models()[3].c;  // padded vocabulary: the padding rows must come back zero
  const std::string dir = test::temp_dir("shard-io-given");
  ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 5);
  hone::save_model(w, c, dir);
  const hone::ShardLayout L = hone::ShardLayout::of(c, 2, 1);
  ModelWeights want = hone::allocate_shard_weights(L, c);
  hone::extract_shard(L, w, want);
  ModelWeights got = hone::allocate_shard_weights(L, c);
  std::fill(got.flat.f32(), got.flat.f32() + got.flat.numel(), 7.f);
  hone::load_shard_weights(got, L, c, dir);
  BOOST_TEST(same_bits(got, want));
  // Weights shaped for another tp are a caller's mistake (Error), not the checkpoint's.
  ModelWeights wrong = hone::allocate_weights(c);
  BOOST_CHECK_THROW(hone::load_shard_weights(wrong, L, c, dir), hone::Error);
}

BOOST_AUTO_TEST_CASE(checkpoint_errors_are_those_of_load_weights) {
  const ModelConfig c = test::tiny_config(Architecture::qwen2, false);
  ModelWeights w = hone::allocate_weights(c);
  test::randomize(w, 8);
  auto both = [&](const std::string& dir, const std::string& needle) {
    const std::string whole = user_error([&] {
      ModelWeights x;
      hone::load_weights(x, c, dir);
    });
    const std::string shard = user_error([&] {
      ModelWeights x;
      hone::load_shard_weights(x, hone::ShardLayout::of(c, 2, 1), c, dir);
    });
    BOOST_TEST(!shard.empty());
    BOOST_TEST(shard == whole);
    BOOST_TEST(shard.find(needle) != std::string::npos, shard);
  };
  auto edited = [&](const std::string& tag, const std::string& drop, std::vector<hone::SafetensorsEntry> extra) {
    const std::string dir = test::temp_dir(tag);
    std::vector<hone::SafetensorsEntry> entries;
    for (const auto& [n, t] : w.named_parameters())
      if (n != drop) entries.push_back(hone::safetensors_entry(n, t));
    entries.insert(entries.end(), extra.begin(), extra.end());
    hone::write_safetensors_checkpoint(dir, entries, 4000);  // sharded: the errors do not depend on the form
    return dir;
  };
  both(edited("shard-io-missing", "model.layers.1.self_attn.v_proj.bias", {}),
       "lacks 1 tensor(s) the Qwen2ForCausalLM config needs: model.layers.1.self_attn.v_proj.bias");
  const hone::Tensor stray = hone::Tensor::zeros({3}, DType::f32);
  both(edited("shard-io-extra", "", {hone::safetensors_entry("model.layers.7.mlp.extra.weight", stray)}),
       "does not use: model.layers.7.mlp.extra.weight");
  const hone::Tensor short_bias = hone::Tensor::zeros({8}, DType::f32);  // one KV head's, not two
  both(edited("shard-io-shape", "model.layers.0.self_attn.k_proj.bias",
              {hone::safetensors_entry("model.layers.0.self_attn.k_proj.bias", short_bias)}),
       "tensor 'model.layers.0.self_attn.k_proj.bias' has shape [8] but the config needs [16]");
  const hone::Tensor int_bias = hone::Tensor::zeros({32}, DType::i32);
  both(edited("shard-io-dtype", "model.layers.1.self_attn.q_proj.bias",
              {hone::safetensors_entry("model.layers.1.self_attn.q_proj.bias", int_bias)}),
       "tensor 'model.layers.1.self_attn.q_proj.bias' has dtype I32");
}

BOOST_AUTO_TEST_CASE(one_rank_saves_as_save_model) {
  for (const Model& m : models())
    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t max_shard : {int64_t(1) << 30, int64_t(3000)}) {
        BOOST_TEST_CONTEXT(m.name << ", " << hone::dtype_name(dtype) << ", shards of " << max_shard) {
          ModelWeights w = hone::allocate_weights(m.c);
          test::randomize(w, 12);
          const std::string want = test::temp_dir("shard-io-save-want"), got = test::temp_dir("shard-io-save-got");
          hone::save_model(w, m.c, want, dtype, max_shard);
          hone::MpiComm one;  // a local group of one
          const hone::ShardLayout L = hone::ShardLayout::of(m.c, 1, 0);
          ModelWeights local = hone::allocate_shard_weights(L, m.c);
          hone::extract_shard(L, w, local);
          hone::save_model_from_shards(local, L, m.c, one, got, dtype, max_shard);
          std::vector<std::string> names;
          for (const auto& e : fs::directory_iterator(want)) names.push_back(e.path().filename().string());
          BOOST_TEST(names.size() == size_t(std::distance(fs::directory_iterator(got), fs::directory_iterator())));
          BOOST_TEST(names.size() >= (max_shard < 4000 ? 4u : 2u));
          for (const std::string& n : names) BOOST_TEST(read_all(got + "/" + n) == read_all(want + "/" + n), n);
        }
      }
}

BOOST_AUTO_TEST_CASE(bad_save_arguments_fail_before_any_message) {
  const ModelConfig c = test::tiny_config(Architecture::llama, false);
  const hone::ShardLayout L = hone::ShardLayout::of(c, 1, 0);
  ModelWeights local = hone::allocate_shard_weights(L, c);
  hone::MpiComm one;
  const std::string dir = test::temp_dir("shard-io-bad-save");
  BOOST_CHECK_THROW(hone::save_model_from_shards(local, L, c, one, dir + "/x", DType::f16), hone::UserError);
  BOOST_CHECK_THROW(hone::save_model_from_shards(local, L, c, one, dir + "/x", DType::f32, 0), hone::UserError);
  BOOST_TEST(!fs::exists(dir + "/x"));
  // A layout of another group size than the communicator's.
  const hone::ShardLayout L2 = hone::ShardLayout::of(c, 2, 0);
  ModelWeights local2 = hone::allocate_shard_weights(L2, c);
  BOOST_CHECK_THROW(hone::save_model_from_shards(local2, L2, c, one, dir + "/x"), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
