// Data parallelism on the CPU under two ranks, with a small transformer and real packed batches:
//   * dp = 2 (each rank half of the global batch, loss divided by the global token count) gives the same summed
//     loss, reduced gradients and updated weights as one rank computing the whole batch;
//   * the distributed optimizer (ZeRO-1) gives the same weights as all-reduce + AdamW over three steps;
//   * bf16 gradient reduction stays within bf16 rounding of fp32;
//   * the sharded and the full optimizer state round trip.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "comm/mpi_comm.h"
#include "common/compare.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "train/adamw.h"
#include "train/distributed_adamw.h"
#include "train/grad_clip.h"
#include "unit/transformer_test_util.h"

namespace {

// Llama with hidden size 15: the parameter count (5715) is odd, so the ZeRO layout pads.
hone::ModelConfig small_config() {
  hone::ModelConfig c = test::tiny_config(hone::Architecture::llama, /*tied=*/true);
  c.hidden_size = 15;
  return c;
}

constexpr int kSeqs = 8;

struct Problem {
  hone::ModelConfig config = small_config();
  std::vector<std::vector<int32_t>> seqs = test::random_sequences({9, 5, 12, 7, 3, 10, 6, 8}, 40, 17);
  std::vector<float> adv = {1.f, -0.5f, 0.25f, -1.f, 0.75f, -0.25f, 0.5f, -0.75f};
  int64_t global_tokens = 0;  // tokens with a target, over the whole batch
  Problem() {
    for (const auto& s : seqs) global_tokens += int64_t(s.size()) - 1;
  }
};

// The GRPO-like loss of sequences [begin, end): -sum_t adv[s] logprob_t / global_tokens, and its gradient
// accumulated into grads (zeroed first).
double loss_and_grads(const Problem& p, const hone::ModelWeights& w, int begin, int end, hone::ModelWeights& grads) {
  std::vector<std::vector<int32_t>> part(p.seqs.begin() + begin, p.seqs.begin() + end);
  const hone::PackedBatch batch = hone::PackedBatch::pack(part);
  hone::Transformer model(p.config, w);
  model.forward(batch, 1.f, /*need_entropy=*/false);
  std::vector<float> d(size_t(batch.num_tokens()), 0.f);
  double loss = 0;
  for (int s = 0; s < batch.num_seqs(); ++s)
    for (int t = batch.seq_begin(s); t < batch.seq_end(s); ++t) {
      if (batch.targets[size_t(t)] < 0) continue;
      const float c = -p.adv[size_t(begin + s)] / float(p.global_tokens);
      d[size_t(t)] = c;
      loss += double(c) * model.logprobs()[t];
    }
  grads.flat.fill_zero();
  model.backward(d.data(), nullptr, grads);
  return loss;
}

hone::ModelWeights initial_weights(const Problem& p) {
  hone::ModelWeights w = hone::allocate_weights(p.config);
  test::randomize(w, 5, 0.2f);
  return w;
}

using test::rel_l2;

hone::AdamWConfig adamw_config() {
  hone::AdamWConfig c;
  c.weight_decay = 0.1f;
  return c;
}

struct Half {
  int begin, end;
};
Half my_half(const hone::Comm& c) {
  const int per = kSeqs / c.size();
  return {c.rank() * per, (c.rank() + 1) * per};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed_adamw)

BOOST_AUTO_TEST_CASE(two_ranks_match_one_rank_on_the_whole_batch) {
  hone::MpiComm world(MPI_COMM_WORLD, "dp");
  BOOST_REQUIRE(world.size() == 2);
  const Problem p;
  const float lr = 1e-2f;
  const double max_norm = 1.0;

  // dp = 1: the whole batch on this rank, the usual AdamW.
  hone::ModelWeights w1 = initial_weights(p), g1 = hone::allocate_weights(p.config);
  const double loss1 = loss_and_grads(p, w1, 0, kSeqs, g1);
  std::vector<float> grad1(g1.flat.f32(), g1.flat.f32() + g1.flat.numel());
  hone::AdamW plain(w1, adamw_config());
  hone::clip_grad_norm(g1.flat.f32(), g1.flat.numel(), max_norm);
  plain.step(w1, g1, lr);

  // dp = 2: half the batch per rank.
  const Half h = my_half(world);
  hone::ModelWeights w2 = initial_weights(p), g2 = hone::allocate_weights(p.config);
  double loss2 = loss_and_grads(p, w2, h.begin, h.end, g2);
  world.all_reduce_sum(&loss2, 1);
  hone::DataParallelAdamW dp(w2, adamw_config(), world);
  // The reduced gradient before clipping: sum the local gradients separately (the step clips in place).
  std::vector<float> grad2(g2.flat.f32(), g2.flat.f32() + g2.flat.numel());
  world.all_reduce_sum(grad2.data(), int64_t(grad2.size()));
  dp.step(w2, g2, lr, max_norm);

  BOOST_TEST_MESSAGE("loss dp1 " << loss1 << " dp2 " << loss2);
  BOOST_TEST(std::abs(loss1 - loss2) <= 1e-5 * std::abs(loss1));
  BOOST_TEST(loss1 != 0.0);
  const double eg = rel_l2(grad2, grad1), ew = rel_l2(w2.flat.f32(), w1.flat.f32(), w1.flat.numel());
  BOOST_TEST_MESSAGE("relative L2: gradients " << eg << ", weights " << ew);
  BOOST_TEST(eg < 1e-5);
  BOOST_TEST(ew < 1e-5);
  // The step changed the weights (the comparison is not of two untouched copies).
  const hone::ModelWeights w0 = initial_weights(p);
  BOOST_TEST(rel_l2(w2.flat.f32(), w0.flat.f32(), w0.flat.numel()) > 1e-4);
}

BOOST_AUTO_TEST_CASE(distributed_optimizer_matches_all_reduce_and_adamw_over_three_steps) {
  hone::MpiComm world(MPI_COMM_WORLD, "dp");
  const Problem p;
  const Half h = my_half(world);
  hone::ModelWeights wa = initial_weights(p), wb = initial_weights(p), g = hone::allocate_weights(p.config);
  hone::DataParallelAdamW plain(wa, adamw_config(), world);
  hone::DistributedAdamW zero(wb, adamw_config(), world);
  BOOST_TEST(zero.layout().padded_size() == p.config.num_parameters() + 1);  // odd count: one element of padding
  BOOST_TEST(zero.layout().shard_size() * 2 == zero.layout().padded_size());
  const double max_norms[] = {1e-3, 1e9, 5e-4};  // clipping active in steps 1 and 3
  for (int step = 0; step < 3; ++step) {
    loss_and_grads(p, wa, h.begin, h.end, g);
    const hone::OptimizerStepResult ra = plain.step(wa, g, 2e-2f, max_norms[step]);
    loss_and_grads(p, wb, h.begin, h.end, g);
    const hone::OptimizerStepResult rb = zero.step(wb, g, 2e-2f, max_norms[step]);
    BOOST_TEST(std::abs(ra.grad_norm - rb.grad_norm) <= 1e-6 * ra.grad_norm);
    BOOST_TEST((ra.clip_coef < 1.f) == (step != 1));
  }
  const double e = rel_l2(wb.flat.f32(), wa.flat.f32(), wa.flat.numel());
  BOOST_TEST_MESSAGE("distributed vs plain after 3 steps: relative L2 " << e);
  BOOST_TEST(e < 1e-6);
  BOOST_TEST(zero.step_count() == 3);
  // The moments agree too: the gathered shards equal the plain optimizer's state.
  const hone::FullOptimizerState s = zero.full_state();
  hone::AdamW& a = plain.adamw();
  BOOST_TEST(rel_l2(s.exp_avg.data(), a.exp_avg().f32(), a.exp_avg().numel()) < 1e-6);
  BOOST_TEST(rel_l2(s.exp_avg_sq.data(), a.exp_avg_sq().f32(), a.exp_avg_sq().numel()) < 1e-6);
  // Every rank holds the same weights after the all-gather.
  std::vector<float> other(wb.flat.f32(), wb.flat.f32() + wb.flat.numel());
  world.broadcast(other.data(), int64_t(other.size()), 1);
  BOOST_TEST(rel_l2(other.data(), wb.flat.f32(), wb.flat.numel()) == 0.0);
}

BOOST_AUTO_TEST_CASE(bf16_gradient_reduction_within_bf16_rounding) {
  hone::MpiComm world(MPI_COMM_WORLD, "dp");
  const Problem p;
  const Half h = my_half(world);
  hone::ModelWeights w = initial_weights(p), g = hone::allocate_weights(p.config);
  loss_and_grads(p, w, h.begin, h.end, g);
  const std::vector<float> local(g.flat.f32(), g.flat.f32() + g.flat.numel());
  std::vector<float> f32 = local, b16 = local;
  hone::all_reduce_gradients(world, f32.data(), int64_t(f32.size()), true);
  hone::all_reduce_gradients(world, b16.data(), int64_t(b16.size()), false);
  const double e = rel_l2(b16, f32);
  BOOST_TEST_MESSAGE("bf16 vs fp32 all-reduce: relative L2 " << e);
  BOOST_TEST(e > 0.0);   // really went through bf16
  BOOST_TEST(e < 8e-3);  // bf16 keeps 8 significant bits: 2^-9 relative per rounding, two roundings
  // The distributed optimizer's bf16 reduce-scatter likewise.
  hone::ModelWeights wf = initial_weights(p), wb = initial_weights(p);
  hone::DistributedAdamW zf(wf, adamw_config(), world, true), zb(wb, adamw_config(), world, false);
  zf.step(wf, g, 1e-3f, 0);
  zb.step(wb, g, 1e-3f, 0);
  const double es = rel_l2(zb.reduced_grad_shard(), zf.reduced_grad_shard());
  BOOST_TEST(es > 0.0);
  BOOST_TEST(es < 8e-3);
  // Adam's first step moves each weight by about lr: bf16 gradients change a few signs at most.
  BOOST_TEST(rel_l2(wb.flat.f32(), wf.flat.f32(), wf.flat.numel()) < 1e-3);
}

BOOST_AUTO_TEST_CASE(sharded_and_full_state_round_trip) {
  hone::MpiComm world(MPI_COMM_WORLD, "dp");
  const Problem p;
  const Half h = my_half(world);
  hone::ModelWeights w = initial_weights(p), g = hone::allocate_weights(p.config);
  hone::DistributedAdamW zero(w, adamw_config(), world);
  for (int step = 0; step < 2; ++step) {
    loss_and_grads(p, w, h.begin, h.end, g);
    zero.step(w, g, 1e-2f, 1.0);
  }
  const hone::ModelWeights saved_w = [&] {
    hone::ModelWeights c = hone::allocate_weights(p.config);
    hone::convert_copy(w.flat, c.flat);
    return c;
  }();
  const hone::ShardOptimizerState shard = zero.shard_state();
  const hone::FullOptimizerState full = zero.full_state();
  BOOST_TEST(shard.step == 2);
  BOOST_TEST(full.exp_avg.size() == size_t(p.config.num_parameters()));

  // The reference third step.
  loss_and_grads(p, w, h.begin, h.end, g);
  zero.step(w, g, 1e-2f, 1.0);

  // Restored from the shard, and from the full state, into fresh optimizers: bitwise the same third step.
  for (const bool from_shard : {true, false}) {
    BOOST_TEST_CONTEXT((from_shard ? "shard state" : "full state")) {
      hone::ModelWeights w2 = hone::allocate_weights(p.config);
      hone::convert_copy(saved_w.flat, w2.flat);
      hone::DistributedAdamW again(w2, adamw_config(), world);
      if (from_shard)
        again.load_shard_state(shard);
      else
        again.load_full_state(full, w2);
      BOOST_TEST(again.step_count() == 2);
      hone::ModelWeights g2 = hone::allocate_weights(p.config);
      loss_and_grads(p, w2, h.begin, h.end, g2);
      again.step(w2, g2, 1e-2f, 1.0);
      BOOST_TEST(rel_l2(w2.flat.f32(), w.flat.f32(), w.flat.numel()) == 0.0);
    }
  }
  // A shard does not load into another rank's place.
  hone::ShardOptimizerState wrong = shard;
  wrong.dp_rank = 1 - shard.dp_rank;
  BOOST_CHECK_THROW(zero.load_shard_state(wrong), hone::Error);
}

BOOST_AUTO_TEST_SUITE_END()
