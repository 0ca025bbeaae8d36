// Expert parallelism on the CPU engine against one rank: the world (2 ranks) as the expert-parallel group, each rank
// holding half the experts of a tiny Qwen3-MoE and routing its own batch (as data-parallel ranks do). Each rank's
// logprobs equal the whole model's on its batch within 1e-5; its dense gradients equal the whole model's on its
// batch, and its experts' gradients the whole model's summed over both ranks' batches (what the expert-data-parallel
// reduction then adds nothing to at ep = world), within 1e-5 relative, with the load-balancing loss in the
// gradient. Also: generation's replica of every expert gathered from the ranks' halves, and extracted back; and
// generation with the experts split (parallel/expert_lockstep.h): each rank generates its own requests, a different
// number of them with different lengths (none at all in one call), and gets the rollouts one rank with every expert
// generates for them, the rank that finishes first running idle passes for the other.
// (Tensor and expert parallelism composed run as `hone run` on 4 ranks: tests/unit/test_grpo_ep.cpp.)
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "comm/host_collectives.h"
#include "comm/mpi_comm.h"
#include "generation/generator.h"
#include "model/moe_feed_forward.h"
#include "model/transformer.h"
#include "parallel/expert_lockstep.h"
#include "parallel/expert_parallel.h"
#include "parallel/shard_weights.h"
#include "unit/transformer_test_util.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(expert_parallel)

namespace {

ModelConfig moe(bool norm) { return test::tiny_moe_config(norm); }

PackedBatch batch_of(const ModelConfig& c, int rank) {
  const auto seqs = rank == 0 ? test::random_sequences({7, 5, 9}, c.vocab_size, 5)
                              : test::random_sequences({4, 11}, c.vocab_size, 6);
  PackedBatch b;
  for (const auto& s : seqs) b.append(s);
  return b;
}

std::vector<float> weights_for(int T) {
  std::vector<float> d;
  for (int t = 0; t < T; ++t) d.push_back(1.f + 0.1f * float(t % 5));
  return d;
}

void check_close(const float* got, const float* want, int64_t n, double tol, const std::string& what) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::abs(double(got[i]) - double(want[i])) / (1.0 + std::abs(double(want[i])));
    if (!(err <= worst)) worst = err;
  }
  BOOST_TEST_CONTEXT(what << ": worst relative error " << worst) { BOOST_TEST(worst <= tol); }
}

// The whole model's logprobs and gradient of sum d logprob + aux_weight aux on `batch` (one rank, no communication).
struct OneRank {
  std::vector<float> logprobs;
  ModelWeights grads;
  double aux = 0;
};
OneRank one_rank(const ModelConfig& c, const ModelWeights& whole, const PackedBatch& batch, double aux_weight) {
  OneRank r;
  Transformer m(c, whole);
  MoeRouting aux;
  aux.aux_loss_weight = aux_weight;
  m.forward(batch, 0.8f, false, true, nullptr, aux);
  r.logprobs.assign(m.logprobs(), m.logprobs() + batch.num_tokens());
  r.aux = m.moe()->aux_loss({});
  r.grads = allocate_weights(c);
  const auto d = weights_for(batch.num_tokens());
  m.backward(d.data(), nullptr, r.grads);
  return r;
}

void run(bool norm) {
  BOOST_TEST_CONTEXT((norm ? "renormalized" : "plain")) {
    MpiComm world(MPI_COMM_WORLD, "ep");
    BOOST_REQUIRE(world.size() == 2);
    const int ep_rank = world.rank();
    const ModelConfig c = moe(norm);
    ModelWeights whole = allocate_weights(c);
    test::randomize(whole, 23);
    const double aux_weight = 0.05;

    const PackedBatch mine = batch_of(c, ep_rank), other = batch_of(c, 1 - ep_rank);
    const OneRank ref = one_rank(c, whole, mine, aux_weight), ref_other = one_rank(c, whole, other, aux_weight);

    ExpertParallel ep(c, world);
    const ShardLayout& layout = ep.layout();
    ModelWeights shard = allocate_shard_weights(layout, c);
    extract_shard(layout, whole, shard);
    Transformer m(c, shard, nullptr, ModelSpan{}, nullptr, &ep);
    MoeRouting aux;
    aux.aux_loss_weight = aux_weight;
    m.forward(mine, 0.8f, false, true, nullptr, aux);
    check_close(m.logprobs(), ref.logprobs.data(), mine.num_tokens(), 1e-5, "logprobs");
    BOOST_TEST(std::fabs(m.moe()->aux_loss({}) - ref.aux) < 1e-6);
    ModelWeights g = allocate_shard_weights(layout, c);
    const auto d = weights_for(mine.num_tokens());
    m.backward(d.data(), nullptr, g);

    // Expected: the dense gradients of this rank's batch, the experts' of both batches.
    ModelWeights want_whole = allocate_weights(c);
    for (const ParamSpec& s : want_whole.specs) {
      const Tensor& a = ref.grads.param(s);
      const Tensor& b = ref_other.grads.param(s);
      float* out = want_whole.param(s).f32();
      for (int64_t i = 0; i < s.numel(); ++i) out[i] = a.f32()[i] + (s.split == Split::expert ? b.f32()[i] : 0.f);
    }
    ModelWeights want = allocate_shard_weights(layout, c);
    extract_shard(layout, want_whole, want);
    for (const ParamShard& p : layout.params())
      check_close(g.flat.f32() + p.offset, want.flat.f32() + p.offset, p.local_numel(), 1e-5, p.spec.name);

    // Generation's replica: every expert gathered from the halves, and this rank's half back out of it.
    const ShardLayout& full = ep.full_layout();
    std::vector<float> all(size_t(full.num_local_params())), back(size_t(layout.num_local_params()));
    ep.gather_experts(shard.flat.f32(), all.data());
    ModelWeights want_full = allocate_shard_weights(full, c);
    extract_shard(full, whole, want_full);
    BOOST_TEST(std::equal(all.begin(), all.end(), want_full.flat.f32()));
    ep.extract_experts(all.data(), back.data());
    BOOST_TEST(std::equal(back.begin(), back.end(), shard.flat.f32()));
  }
}

// Requests of one rank in one call: rank 0 three of different lengths, rank 1 one long one, or none (call 1).
std::vector<GenerationRequest> requests_of(const ModelConfig& c, int rank, int call) {
  std::vector<GenerationRequest> r;
  const int n = rank == 0 ? 3 : (call == 1 ? 0 : 1);
  for (int i = 0; i < n; ++i) {
    GenerationRequest q;
    const auto seq = test::random_sequences({4 + i + rank}, c.vocab_size, uint64_t(40 + 10 * rank + i + call))[0];
    q.prompt.assign(seq.begin(), seq.end());
    q.sample_index = 100 * rank + i;
    q.max_new_tokens = rank == 0 ? 2 + 3 * i : 12;
    r.push_back(q);
  }
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(ep2_equals_one_rank) {
  run(false);
  run(true);
}

BOOST_AUTO_TEST_CASE(generation_with_split_experts_equals_every_expert) {
  MpiComm world(MPI_COMM_WORLD, "ep");
  BOOST_REQUIRE(world.size() == 2);
  const ModelConfig c = moe(true);
  ModelWeights whole = allocate_weights(c);
  test::randomize(whole, 31);
  ExpertParallel ep(c, world);
  ModelWeights shard = allocate_shard_weights(ep.layout(), c);
  extract_shard(ep.layout(), whole, shard);
  ExpertLockstep lockstep(world);
  GenerationOptions two;
  two.max_num_seqs = 2;  // two sequences at once: several prefills
  auto split = make_cpu_generator(c, shard, two, nullptr, &ep, &lockstep);
  auto every = make_cpu_generator(c, whole, two);
  SamplingParams p;
  p.temperature = 0.9f;
  StopCriteria stop;
  stop.max_new_tokens = 12;
  for (int call = 0; call < 2; ++call) {
    BOOST_TEST_CONTEXT("rank " << world.rank() << ", call " << call) {
      const std::vector<GenerationRequest> req = requests_of(c, world.rank(), call);
      const std::vector<Rollout> got = split->generate(req, p, stop, 7, uint32_t(call), 64);
      const std::vector<Rollout> want = every->generate(req, p, stop, 7, uint32_t(call), 64);
      BOOST_REQUIRE_EQUAL(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        BOOST_TEST(got[i].completion == want[i].completion);
        BOOST_TEST(got[i].routing == want[i].routing);
        check_close(got[i].logprobs.data(), want[i].logprobs.data(), int64_t(want[i].logprobs.size()), 1e-5,
                    "generation logprobs");
      }
      // A rank's own passes: its prefills and decode steps. The rank with fewer idles until the other is
      // done (rank 1 has no requests at all in call 1).
      const int64_t mine = split->stats().waves + split->stats().decode_steps;
      const int64_t most = all_reduce_max_value(world, mine);
      const int64_t idle = split->stats().tail.idle_passes;
      BOOST_TEST(idle == most - mine);
      if (call == 1 && world.rank() == 1) BOOST_TEST(idle > 0);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
