// Pipeline stages' shards and the resharding refit without MPI: every (tp, pp) rank's stage layout together holds
// the whole model (the tied embedding on the first and last stage, counted once in the norm); and the resharding
// plans of all ranks of a world, executed here by moving their packed blocks by hand, give each generation rank
// exactly its generation.tp slice of the whole model, bitwise, for several training and generation layouts.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <map>

#include "model/weights.h"
#include "parallel/reshard.h"
#include "parallel/shard_layout.h"
#include "parallel/shard_weights.h"
#include "transformer_test_util.h"

using namespace hone;

namespace {

ModelConfig four_layers(Architecture arch, bool tied) {
  ModelConfig c = test::tiny_config(arch, tied);
  c.num_hidden_layers = 4;
  c.vocab_size = 41;  // padded under tp
  return c;
}

// Every rank's training shard of its stage, from the whole model.
std::vector<std::vector<float>> training_shards(const ModelConfig& c, const RankGrid& g, const PipelineLayout& pipe,
                                                const ModelWeights& whole) {
  std::vector<std::vector<float>> out;
  for (int w = 0; w < g.world_size(); ++w) {
    const RankCoord x = g.coord(w);
    const ShardLayout L = ShardLayout::of(c, g.tp(), x.tp, &pipe, x.pp);
    std::vector<float> local(size_t(L.num_local_params()));
    extract_shard_flat(L, whole.flat.f32(), local.data());
    out.push_back(std::move(local));
  }
  return out;
}

// Runs every rank's plan: the all-to-all of each round done by copying rank s's packed block for w into w's.
std::vector<std::vector<float>> reshard_all(const ModelConfig& c, const RankGrid& g, const PipelineLayout& pipe,
                                            int tg, const std::vector<std::vector<float>>& train) {
  const int W = g.world_size();
  std::vector<ReshardPlan> plans;
  for (int w = 0; w < W; ++w) plans.push_back(plan_reshard(c, g, pipe, tg, w, /*round_elements=*/700));
  // Padding rows of the vocabulary are never written: they start at zero, as the engines' buffers do.
  std::vector<std::vector<float>> gen;
  for (int w = 0; w < W; ++w) gen.emplace_back(size_t(plans[size_t(w)].gen_numel), 0.f);
  const size_t rounds = plans[0].rounds.size();
  BOOST_TEST(rounds > 1u);  // small rounds: several
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<std::vector<float>> send(static_cast<size_t>(W));
    for (int s = 0; s < W; ++s) {
      const ReshardRound& r = plans[size_t(s)].rounds[k];
      send[size_t(s)].assign(size_t(r.send_total), 0.f);
      for (int w = 0; w < W; ++w)
        copy_blocks(r.send[size_t(w)], train[size_t(s)].data(), send[size_t(s)].data() + r.send_displs[size_t(w)]);
    }
    for (int w = 0; w < W; ++w) {
      const ReshardRound& r = plans[size_t(w)].rounds[k];
      copy_blocks(r.local, train[size_t(w)].data(), gen[size_t(w)].data());
      for (int s = 0; s < W; ++s) {
        const ReshardRound& rs = plans[size_t(s)].rounds[k];
        BOOST_REQUIRE_EQUAL(rs.send_counts[size_t(w)], r.recv_counts[size_t(s)]);
        const float* block = send[size_t(s)].data() + rs.send_displs[size_t(w)];
        copy_blocks(r.recv[size_t(s)], block, gen[size_t(w)].data());
      }
    }
  }
  return gen;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reshard)

BOOST_AUTO_TEST_CASE(stages_together_hold_the_whole_model_once) {
  for (bool tied : {true, false}) {
    const ModelConfig c = four_layers(Architecture::qwen3, tied);
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 3);
    double expect = 0;
    for (int64_t i = 0; i < whole.flat.numel(); ++i) expect += double(whole.flat.f32()[i]) * whole.flat.f32()[i];
    for (const auto& [tp, pp, vpp] : std::vector<std::tuple<int, int, int>>{{1, 2, 1}, {2, 2, 1}, {1, 2, 2}, {2, 4, 1}}) {
      const PipelineLayout pipe = PipelineLayout::of(c.num_hidden_layers, pp, vpp);
      std::map<std::string, int> copies;
      double sum = 0;
      for (int s = 0; s < pp; ++s)
        for (int t = 0; t < tp; ++t) {
          const ShardLayout L = ShardLayout::of(c, tp, t, &pipe, s);
          BOOST_TEST(L.param_layout().layers.size() == size_t(c.num_hidden_layers));
          std::vector<float> local(size_t(L.num_local_params()));
          extract_shard_flat(L, whole.flat.f32(), local.data());
          sum += L.weighted_sum_squares(0, L.num_local_params(), [&](int64_t off, int64_t n) {
            double x = 0;
            for (int64_t i = 0; i < n; ++i) x += double(local[size_t(off + i)]) * local[size_t(off + i)];
            return x;
          });
          if (t == 0)
            for (const ParamShard& p : L.params()) ++copies[p.spec.name];
        }
      BOOST_TEST_INFO("tp " << tp << " pp " << pp << " vpp " << vpp << (tied ? " tied" : ""));
      BOOST_TEST(std::abs(sum - expect) <= 1e-9 * expect);
      BOOST_TEST(copies.size() == param_table(c).size());
      for (const auto& [name, n] : copies) BOOST_TEST(n == (tied && name == "model.embed_tokens.weight" ? 2 : 1), name);
    }
  }
}

BOOST_AUTO_TEST_CASE(resharding_gives_each_generation_rank_its_slice_bitwise) {
  struct Case {
    int world, tp, pp, vpp, tg;
  };
  const std::vector<Case> cases = {{2, 1, 2, 1, 1}, {2, 1, 2, 1, 2}, {4, 2, 2, 1, 2}, {4, 2, 2, 1, 4},
                                   {4, 2, 2, 1, 1}, {4, 1, 2, 2, 2}, {4, 4, 1, 1, 2}, {8, 2, 2, 1, 4},
                                   {4, 1, 4, 1, 4}};
  for (bool tied : {true, false})
    for (const Case& k : cases) {
      BOOST_TEST_CONTEXT("world " << k.world << ", tp " << k.tp << " x pp " << k.pp << " (vpp " << k.vpp
                                  << ") -> generation.tp " << k.tg << (tied ? ", tied" : "")) {
        ModelConfig c = four_layers(Architecture::qwen3, tied);
        c.num_key_value_heads = k.tp > 2 || k.tg > 2 ? 1 : 2;  // tp beyond the KV heads: replicated heads
        ModelWeights whole = allocate_weights(c);
        test::randomize(whole, 5);
        const RankGrid g(k.world, k.tp, k.pp);
        const PipelineLayout pipe = PipelineLayout::of(c.num_hidden_layers, k.pp, k.vpp);
        const auto gen = reshard_all(c, g, pipe, k.tg, training_shards(c, g, pipe, whole));
        for (int w = 0; w < k.world; ++w) {
          const ShardLayout L = ShardLayout::of(c, k.tg, w % k.tg);
          std::vector<float> expect(size_t(L.num_local_params()));
          extract_shard_flat(L, whole.flat.f32(), expect.data());
          BOOST_TEST(gen[size_t(w)] == expect, "rank " << w);
        }
      }
    }
}

BOOST_AUTO_TEST_SUITE_END()
