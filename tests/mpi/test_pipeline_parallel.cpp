// Pipeline parallelism on the CPU engine against one rank: the world (2 ranks) as one pipeline group, each rank
// holding its stage of a tiny 4-layer model, the same three packed micro-batches on both. The training pass
// (1F1B; interleaved with two chunks per rank; an uneven split) gives the whole model's logprobs and, gathered from
// the stages after the tied embedding's gradients are summed over its two copies, every gradient within 1e-5; the
// forward-only pass the same logprobs. The resharding refit from the two stages into generation shards (one rank or
// two per replica) equals the whole model's slices bitwise. Comm::exchange matches several messages to one peer in
// order.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "comm/mpi_comm.h"
#include "model/transformer.h"
#include "parallel/pipeline_model.h"
#include "parallel/reshard.h"
#include "parallel/shard_weights.h"
#include "rl/pipeline_broadcast.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(pipeline_parallel)

namespace {

ModelConfig four_layers(Architecture arch, bool tied) {
  ModelConfig c = test::tiny_config(arch, tied);
  c.num_hidden_layers = 4;
  return c;
}

std::vector<PackedBatch> batches_for(const ModelConfig& c) {
  std::vector<PackedBatch> out;
  for (const auto& lengths : std::vector<std::vector<int>>{{7, 5}, {9}, {3, 4, 6}}) {
    PackedBatch b;
    for (const auto& s : test::random_sequences(lengths, c.vocab_size, uint32_t(lengths.size() * 31 + lengths[0])))
      b.append(s);
    out.push_back(b);
  }
  return out;
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

void run(const ModelConfig& c, int vpp, const std::vector<int64_t>& chunk_layers, const char* name) {
  BOOST_TEST_CONTEXT(name) {
    MpiComm world(MPI_COMM_WORLD, "pp");
    BOOST_REQUIRE(world.size() == 2);
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 19);
    const std::vector<PackedBatch> batches = batches_for(c);
    std::vector<const PackedBatch*> ptrs;
    for (const PackedBatch& b : batches) ptrs.push_back(&b);

    // One rank: the whole model, every micro-batch's gradient accumulated.
    Transformer one(c, whole);
    ModelWeights g_one = allocate_weights(c);
    std::vector<std::vector<float>> lp_one;
    for (const PackedBatch& b : batches) {
      one.forward(b, 0.8f, true);
      lp_one.emplace_back(one.logprobs(), one.logprobs() + b.num_tokens());
      const auto dlp = test::logprob_weights(b.num_tokens()), dent = test::entropy_weights(b.num_tokens());
      one.backward(dlp.data(), dent.data(), g_one);
    }

    // pp = 2: this rank's stage.
    const PipelineLayout pipe = PipelineLayout::of(c.num_hidden_layers, 2, vpp, chunk_layers);
    const ShardLayout stage = ShardLayout::of(c, 1, 0, &pipe, world.rank());
    ModelWeights w = allocate_shard_weights(stage, c);
    extract_shard(stage, whole, w);
    ModelWeights g = allocate_shard_weights(stage, c);
    PipelineModel model(c, stage, w, nullptr, world);
    std::vector<std::vector<float>> lp_train(batches.size());
    std::vector<float> dlp, dent;
    auto loss = [&](int mb, const Transformer& head) {
      const int T = batches[size_t(mb)].num_tokens();
      lp_train[size_t(mb)].assign(head.logprobs(), head.logprobs() + T);
      dlp = test::logprob_weights(T);
      dent = test::entropy_weights(T);
      return PipelineModel::LossGrads{dlp.data(), dent.data()};
    };
    const PipelineRunStats stats = model.train(ptrs, 0.8f, loss, g.flat.f32());
    BOOST_TEST(stats.messages_sent == int64_t(batches.size()) * (2 * vpp - 1));  // every chunk boundary, one way
    model.sum_tied_gradients(g);
    std::vector<int> sizes;
    for (const PackedBatch& b : batches) sizes.push_back(b.num_tokens());
    rl::broadcast_logprobs(world, lp_train, sizes, 1);
    for (size_t i = 0; i < batches.size(); ++i)
      check_close(lp_train[i].data(), lp_one[i].data(), sizes[i], 1e-5, "training logprobs of micro-batch " + std::to_string(i));

    // The forward-only pass: the same logprobs.
    std::vector<std::vector<float>> lp;
    model.logprobs(ptrs, 0.8f, lp);
    rl::broadcast_logprobs(world, lp, sizes, 1);
    for (size_t i = 0; i < batches.size(); ++i)
      check_close(lp[i].data(), lp_one[i].data(), sizes[i], 1e-5, "logprobs of micro-batch " + std::to_string(i));

    // The stages' gradients gathered on rank 0: the whole model's.
    MpiComm self(MPI_COMM_SELF, "tp");
    std::vector<float> gathered(size_t(g_one.flat.numel()), 0.f);
    gather_model_flat(c, stage, g.flat.f32(), self, world, world.rank() == 0 ? gathered.data() : nullptr);
    if (world.rank() == 0) check_close(gathered.data(), g_one.flat.f32(), g_one.flat.numel(), 1e-5, "gradients");
    // The norm over the stages counts the tied embedding once.
    double sq = stage.weighted_sum_squares(0, g.flat.numel(), [&](int64_t off, int64_t n) {
      double x = 0;
      for (int64_t i = 0; i < n; ++i) x += double(g.flat.f32()[off + i]) * g.flat.f32()[off + i];
      return x;
    });
    world.all_reduce_sum(&sq, 1);
    double sq_one = 0;
    for (int64_t i = 0; i < g_one.flat.numel(); ++i) sq_one += double(g_one.flat.f32()[i]) * g_one.flat.f32()[i];
    BOOST_TEST(std::abs(sq - sq_one) <= 1e-5 * sq_one);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(one_f_one_b_tied_embedding_across_stages) { run(four_layers(Architecture::qwen3, true), 1, {}, "qwen3 tied"); }
BOOST_AUTO_TEST_CASE(interleaved_two_chunks_per_rank) { run(four_layers(Architecture::llama, false), 2, {}, "llama vpp 2"); }
BOOST_AUTO_TEST_CASE(uneven_split) { run(four_layers(Architecture::qwen2, true), 1, {1, 3}, "qwen2 split 1 + 3"); }

// The refit from two pipeline stages into generation shards of every layer equals the whole model's slices.
BOOST_AUTO_TEST_CASE(resharding_refit_equals_gathering_bitwise) {
  MpiComm world(MPI_COMM_WORLD, "world");
  for (bool tied : {true, false})
    for (int tg : {1, 2}) {
      BOOST_TEST_CONTEXT((tied ? "tied" : "untied") << ", generation.tp " << tg) {
        ModelConfig c = four_layers(Architecture::qwen3, tied);
        c.vocab_size = 41;  // padded at generation.tp = 2
        ModelWeights whole = allocate_weights(c);
        test::randomize(whole, 29);
        const RankGrid grid(2, 1, 2);
        const PipelineLayout pipe = PipelineLayout::of(c.num_hidden_layers, 2);
        const ShardLayout stage = ShardLayout::of(c, 1, 0, &pipe, world.rank());
        ModelWeights w = allocate_shard_weights(stage, c);
        extract_shard(stage, whole, w);
        const ShardLayout gen = ShardLayout::of(c, tg, world.rank() % tg);
        ModelWeights g = allocate_shard_weights(gen, c);
        Resharder<CpuBackend> r(plan_reshard(c, grid, pipe, tg, world.rank(), /*round_elements=*/1000), world);
        BOOST_TEST(r.plan().rounds.size() > 1u);
        r.run(w.flat.f32(), g.flat.f32());
        std::vector<float> expect(size_t(gen.num_local_params()));
        extract_shard_flat(gen, whole.flat.f32(), expect.data());
        BOOST_TEST(std::vector<float>(g.flat.f32(), g.flat.f32() + g.flat.numel()) == expect);
        BOOST_TEST(r.plan().elements_received > 0);
      }
    }
}

// Two messages each way between one pair in one exchange: they match in the order each side lists them.
BOOST_AUTO_TEST_CASE(exchange_matches_messages_in_order) {
  MpiComm world(MPI_COMM_WORLD, "pp");
  const int peer = 1 - world.rank();
  std::vector<float> a(5, float(10 * world.rank() + 1)), b(3, float(10 * world.rank() + 2)), ra(5), rb(3);
  const PeerTransfer ops[] = {{true, a.data(), 5, peer}, {true, b.data(), 3, peer},
                              {false, ra.data(), 5, peer}, {false, rb.data(), 3, peer}};
  world.exchange_raw(ops, CommType::f32);
  BOOST_TEST(ra == std::vector<float>(5, float(10 * peer + 1)));
  BOOST_TEST(rb == std::vector<float>(3, float(10 * peer + 2)));
}

BOOST_AUTO_TEST_SUITE_END()
