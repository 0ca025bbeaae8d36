// Tensor parallelism on the CPU engine against one rank: the world (2 ranks) as one tp group, each rank holding its
// shard of a tiny model, the same packed batch on every rank; logprobs and entropies within 1e-5 of the whole model
// computed on each rank alone, and every gradient (gathered from the shards after the partial sums) within 1e-5
// relative; without and with sequence parallelism (21 tokens: the sequence-parallel run pads one), and with the
// sequence-parallel collectives in three uneven chunks of rows (the layout parallel.tp_comm_overlap uses). Models:
// Qwen3 (q/k norm, tied), Llama with Llama 3 rope scaling (untied), Qwen2 (q/k/v biases), and a Qwen3 with one KV
// head (replicated over the two ranks) and a vocabulary that tp does not divide (padded).
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "comm/mpi_comm.h"
#include "generation/generator.h"
#include "model/transformer.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(tensor_parallel)

namespace {

ModelConfig qwen3() { return test::tiny_config(Architecture::qwen3, true); }
ModelConfig llama_scaled() {
  ModelConfig c = test::tiny_config(Architecture::llama, false);
  c.rope.llama3 = true;
  c.rope.factor = 8.f;
  c.rope.original_max_position_embeddings = 16;
  return c;
}
ModelConfig qwen2() { return test::tiny_config(Architecture::qwen2, false); }
ModelConfig qwen3_one_kv_head() {
  ModelConfig c = test::tiny_config(Architecture::qwen3, true);
  c.num_key_value_heads = 1;
  c.vocab_size = 41;
  return c;
}

PackedBatch batch_for(const ModelConfig& c) {
  const auto seqs = test::random_sequences({7, 5, 9}, c.vocab_size, 5);
  PackedBatch b;
  for (const auto& s : seqs) b.append(s);
  return b;
}

void check_close(const float* got, const float* want, int64_t n, double tol, const std::string& what) {
  double worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(double(got[i]) - double(want[i])) / (1.0 + std::abs(double(want[i])));
    if (!(err <= worst)) worst = err, at = i;  // NaN lands here and fails below
  }
  BOOST_TEST_CONTEXT(what << ": worst relative error " << worst << " at " << at) { BOOST_TEST(worst <= tol); }
}

// The gradients add the shards' partial sums in another order than one rank's GEMMs: fp32 rounding of a few 1e-6,
// which OpenBLAS's kernel for the machine's CPU moves (1.1e-5 at worst on some, under 1e-5 on others).
constexpr double kGradTol = 3e-5;

void run_one(const ModelConfig& c, const char* name, bool sp, int chunks = 1) {
  BOOST_TEST_CONTEXT(name << (sp ? ", sequence parallel" : "") << (chunks > 1 ? ", chunked" : "")) {
    MpiComm world(MPI_COMM_WORLD, "tp");
    BOOST_REQUIRE(world.size() == 2);
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 17);
    const PackedBatch batch = batch_for(c);
    const int T = batch.num_tokens();
    std::vector<float> dlp, dent;
    for (int t = 0; t < T; ++t) {
      dlp.push_back(1.f + 0.1f * float(t % 5));
      dent.push_back(0.3f - 0.05f * float(t % 3));
    }

    // One rank: the whole model.
    Transformer one(c, whole);
    one.forward(batch, 0.8f, true);
    ModelWeights g_one = allocate_weights(c);
    one.backward(dlp.data(), dent.data(), g_one);

    // tp = 2: this rank's shard.
    TensorParallel tp(c, world, sp, chunks);
    BOOST_TEST(tp.local_rows(22) == (sp ? 11 : 22));
    BOOST_TEST(tp.sequence_chunks(22).count() == chunks);
    ModelWeights shard = allocate_shard_weights(tp.layout(), c);
    extract_shard(tp.layout(), whole, shard);
    Transformer two(c, shard, &tp);
    two.forward(batch, 0.8f, true);
    check_close(two.logprobs(), one.logprobs(), T, 1e-5, "logprob");
    check_close(two.entropy(), one.entropy(), T, 1e-5, "entropy");
    ModelWeights g_shard = allocate_shard_weights(tp.layout(), c);
    two.backward(dlp.data(), dent.data(), g_shard);
    tp.sum_partial_gradients(g_shard);

    // Each rank's gradient shard against the same slices of the whole gradient.
    std::vector<float> expect(size_t(tp.layout().num_local_params()));
    extract_shard_flat(tp.layout(), g_one.flat.f32(), expect.data());
    for (const ParamShard& p : tp.layout().params())
      check_close(g_shard.flat.f32() + p.offset, expect.data() + p.offset, p.local_numel(), kGradTol,
                  "gradient of " + p.spec.name);

    // Gathered on rank 0: the whole gradient; and the global norm over the shards equals the whole one's.
    std::vector<float> gathered(size_t(g_one.flat.numel()), 0.f);
    gather_shards_flat(c, tp.layout(), g_shard.flat.f32(), world, gathered.data(), 0);
    if (world.rank() == 0) check_close(gathered.data(), g_one.flat.f32(), g_one.flat.numel(), kGradTol, "gathered");
    double sq = tp.weighted_sum_squares(g_shard.flat.f32(), 0, g_shard.flat.numel());
    world.all_reduce_sum(&sq, 1);
    double sq_one = 0;
    for (int64_t i = 0; i < g_one.flat.numel(); ++i) sq_one += double(g_one.flat.f32()[i]) * g_one.flat.f32()[i];
    BOOST_TEST(std::abs(sq - sq_one) <= 1e-5 * sq_one);
  }
}

void run(const ModelConfig& c, const char* name) {
  run_one(c, name, false);
  run_one(c, name, true);
  run_one(c, name, true, 3);  // 11 rows a rank: chunks of 4, 4 and 3
}

}  // namespace

BOOST_AUTO_TEST_CASE(qwen3_qk_norm_tied) { run(qwen3(), "qwen3"); }
BOOST_AUTO_TEST_CASE(llama_rope_scaling) { run(llama_scaled(), "llama"); }
BOOST_AUTO_TEST_CASE(qwen2_biases) { run(qwen2(), "qwen2"); }
BOOST_AUTO_TEST_CASE(replicated_kv_head_and_padded_vocabulary) { run(qwen3_one_kv_head(), "qwen3 one kv head"); }

// Rollouts do not depend on tp: greedy, and sampled with temperature, top-k, top-p and min-p from the same Philox
// uniforms, give the same tokens and logprobs within 1e-5 (the logits slices are gathered before the sampler).
BOOST_AUTO_TEST_CASE(rollouts_are_token_identical) {
  MpiComm world(MPI_COMM_WORLD, "tp");
  for (const ModelConfig& c : {qwen3(), qwen3_one_kv_head(), qwen2()}) {
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 23, 0.5f);
    TensorParallel tp(c, world, true);
    ModelWeights shard = allocate_shard_weights(tp.layout(), c);
    extract_shard(tp.layout(), whole, shard);
    const auto prompts = test::random_sequences({3, 5, 2}, c.vocab_size, 9);
    const auto requests = group_requests(prompts, 3);
    StopCriteria stop;
    stop.max_new_tokens = 12;
    stop.stop_token_ids = {7};
    SamplingParams greedy;
    greedy.greedy = true;
    SamplingParams filtered;
    filtered.temperature = 0.9f;
    filtered.top_k = 20;
    filtered.top_p = 0.9f;
    filtered.min_p = 0.02f;
    for (const SamplingParams& sp : {greedy, SamplingParams{}, filtered}) {
      auto one = make_cpu_generator(c, whole), two = make_cpu_generator(c, shard, {}, &tp);
      const auto a = one->generate(requests, sp, stop, 5, 1, 40);
      const auto b = two->generate(requests, sp, stop, 5, 1, 40);
      BOOST_REQUIRE_EQUAL(a.size(), b.size());
      int64_t tokens = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        BOOST_TEST(a[i].completion == b[i].completion);
        tokens += int64_t(a[i].completion.size());
        BOOST_REQUIRE_EQUAL(a[i].logprobs.size(), b[i].logprobs.size());
        for (size_t j = 0; j < a[i].logprobs.size(); ++j)
          BOOST_TEST(std::abs(a[i].logprobs[j] - b[i].logprobs[j]) <= 1e-5 * (1 + std::abs(a[i].logprobs[j])));
      }
      BOOST_TEST(tokens > int64_t(a.size()));  // more than one token per rollout on average
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
