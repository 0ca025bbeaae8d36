// Tensor-parallel HF files under two ranks (the world as one tp group): each rank loads its tp = 2 shard of a saved
// model (its slices of the file only) and equals the slices of the whole model; save_model_from_shards, rank 0
// writing what both shards make up, writes the same folder, byte for byte, as save_model of the whole model: f32
// and bf16, one file and sharded with an index. Models: Qwen3 (tied, q/k norm), Llama (untied), Qwen2 (biases),
// and a Qwen3 with one KV head (replicated over the two ranks) and a vocabulary tp does not divide (padded).
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "comm/mpi_comm.h"
#include "common/paths.h"
#include "parallel/shard_io.h"
#include "parallel/shard_weights.h"
#include "unit/transformer_test_util.h"

namespace fs = std::filesystem;
using namespace hone;

BOOST_AUTO_TEST_SUITE(shard_io_mpi)

namespace {

ModelConfig qwen3_one_kv_head() {
  ModelConfig c = test::tiny_config(Architecture::qwen3, true);
  c.num_key_value_heads = 1;
  c.vocab_size = 41;
  return c;
}

// A folder both ranks name alike (rank 0's pid), fresh: test::temp_dir would name one per process.
std::string shared_temp_dir(Comm& world, const std::string& tag) {
  int64_t pid = getpid();
  world.broadcast(&pid, 1, 0);
  const std::string dir = test::build_dir() + "/test-tmp/" + tag + "-" + std::to_string(pid);
  if (world.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  world.barrier();
  return dir;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> file_names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void run(const ModelConfig& c, const char* name) {
  BOOST_TEST_CONTEXT(name) {
    MpiComm world(MPI_COMM_WORLD, "tp");
    BOOST_REQUIRE(world.size() == 2);
    const std::string base = shared_temp_dir(world, std::string("shard-io-mpi-") + name);
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 29);  // the same on both ranks
    if (world.rank() == 0) save_model(whole, c, base + "/source", DType::f32, int64_t(1) << 30);
    world.barrier();

    const ShardLayout layout = ShardLayout::of(c, 2, world.rank());
    ModelWeights local;
    load_shard_weights(local, layout, c, base + "/source");
    ModelWeights want = allocate_shard_weights(layout, c);
    extract_shard(layout, whole, want);
    BOOST_TEST(std::memcmp(local.flat.data(), want.flat.data(), want.flat.nbytes()) == 0);

    for (DType dtype : {DType::f32, DType::bf16})
      for (int64_t max_shard : {int64_t(1) << 30, int64_t(3000)}) {
        BOOST_TEST_CONTEXT(dtype_name(dtype) << ", shards of " << max_shard << " bytes") {
          const std::string tag = std::string(dtype_name(dtype)) + "-" + std::to_string(max_shard);
          const std::string got = base + "/from-shards-" + tag, ref = base + "/whole-" + tag;
          save_model_from_shards(local, layout, c, world, got, dtype, max_shard);
          if (world.rank() == 0) {
            save_model(whole, c, ref, dtype, max_shard);
            const std::vector<std::string> names = file_names(ref);
            BOOST_TEST(file_names(got) == names);
            BOOST_TEST(names.size() >= (max_shard < 4000 ? 4u : 2u));  // sharded: shards, index and config
            for (const std::string& n : names) BOOST_TEST(read_all(got + "/" + n) == read_all(ref + "/" + n), n);
          }
          world.barrier();
        }
      }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(qwen3_qk_norm_tied) { run(test::tiny_config(Architecture::qwen3, true), "qwen3"); }
BOOST_AUTO_TEST_CASE(llama_untied) { run(test::tiny_config(Architecture::llama, false), "llama"); }
BOOST_AUTO_TEST_CASE(qwen2_biases) { run(test::tiny_config(Architecture::qwen2, false), "qwen2"); }
BOOST_AUTO_TEST_CASE(replicated_kv_head_and_padded_vocabulary) { run(qwen3_one_kv_head(), "qwen3-one-kv-head"); }

BOOST_AUTO_TEST_SUITE_END()
