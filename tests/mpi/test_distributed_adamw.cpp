// Data parallelism on the CPU under two ranks, with a small transformer and real packed batches:
//   * dp = 2 (each rank half of the global batch, loss divided by the global token count) gives the same summed
//     loss, reduced gradients and updated weights as one rank computing the whole batch;
//   * the distributed optimizer (ZeRO-1) gives the same weights as all-reduce + AdamW over three steps;
//   * bf16 gradient reduction stays within bf16 rounding of fp32;
//   * the sharded and the full optimizer state round trip;
//   * under tensor parallelism (tp = 2; dp = 1 over -np 2, dp = 2 over -np 4) ZeRO-1's clipping norm over many
//     buckets, each chunk's values weighted where they lie in the flat buffer, equals the whole model's norm and
//     the plain optimizer's.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/host_collectives.h"
#include "comm/mpi_comm.h"
#include "common/compare.h"
#include "model/packed_batch.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "train/adamw.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_clip.h"
#include "train/sharded_adamw.h"
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

using Cpu = hone::CpuBackend;
using Plain = hone::AllReduceAdamW<Cpu>;
using Zero = hone::ShardedAdamW<Cpu>;

// The plain optimizer over dp with w's fp32 values as its master weights (updated in place).
std::unique_ptr<Plain> plain_over(hone::ModelWeights& w, hone::Comm& dp, hone::DataParallelOptions o = {}) {
  return std::make_unique<Plain>(w, adamw_config(), &dp, std::move(o), Cpu::Exec{}, w.flat.f32());
}

// The gradients backward wrote into g, into the optimizer's buffer (its padding stays zero).
void load_grads(hone::DataParallelOptimizer<Cpu>& opt, const hone::ModelWeights& g) {
  std::copy(g.flat.f32(), g.flat.f32() + g.flat.numel(), opt.grads());
}

// This rank's reduced chunk of every bucket of a ZeRO-1 optimizer, one after the other.
std::vector<float> reduced_chunks(const Zero& z) {
  std::vector<float> out;
  for (const hone::ZeroBucket& b : z.zero_layout().buckets()) {
    const float* c = z.grads() + z.zero_layout().chunk_flat_offset(b);
    out.insert(out.end(), c, c + z.zero_layout().chunk_size(b));
  }
  return out;
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
  hone::AdamW<Cpu> plain(w1, adamw_config());
  hone::clip_grad_norm(g1.flat.f32(), g1.flat.numel(), max_norm);
  plain.step(w1.flat.f32(), g1.flat.f32(), lr);

  // dp = 2: half the batch per rank.
  const Half h = my_half(world);
  hone::ModelWeights w2 = initial_weights(p), g2 = hone::allocate_weights(p.config);
  double loss2 = loss_and_grads(p, w2, h.begin, h.end, g2);
  world.all_reduce_sum(&loss2, 1);
  const std::unique_ptr<Plain> dp = plain_over(w2, world);
  // The reduced gradient before clipping: sum the local gradients separately (the step clips in place).
  std::vector<float> grad2(g2.flat.f32(), g2.flat.f32() + g2.flat.numel());
  world.all_reduce_sum(grad2.data(), int64_t(grad2.size()));
  load_grads(*dp, g2);
  dp->step(lr, max_norm, w2.flat.f32());

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
  const std::unique_ptr<Plain> plain = plain_over(wa, world);
  Zero zero(wb, adamw_config(), world);
  BOOST_TEST(zero.zero_layout().padded_size() == p.config.num_parameters() + 1);  // odd count: one element of padding
  BOOST_TEST(zero.zero_layout().shard_size() * 2 == zero.zero_layout().padded_size());
  const double max_norms[] = {1e-3, 1e9, 5e-4};  // clipping active in steps 1 and 3
  for (int step = 0; step < 3; ++step) {
    loss_and_grads(p, wa, h.begin, h.end, g);
    load_grads(*plain, g);
    const hone::OptimizerStepResult ra = plain->step(2e-2f, max_norms[step], wa.flat.f32());
    loss_and_grads(p, wb, h.begin, h.end, g);
    load_grads(zero, g);
    const hone::OptimizerStepResult rb = zero.step(2e-2f, max_norms[step], wb.flat.f32());
    BOOST_TEST(std::abs(ra.grad_norm - rb.grad_norm) <= 1e-6 * ra.grad_norm);
    BOOST_TEST((ra.clip_coef < 1.f) == (step != 1));
  }
  const double e = rel_l2(wb.flat.f32(), wa.flat.f32(), wa.flat.numel());
  BOOST_TEST_MESSAGE("distributed vs plain after 3 steps: relative L2 " << e);
  BOOST_TEST(e < 1e-6);
  BOOST_TEST(zero.step_count() == 3);
  // The moments agree too: the gathered shards equal the plain optimizer's state.
  const size_t n = size_t(wa.flat.numel());
  std::vector<float> m(n), v(n);
  zero.read_state(nullptr, m.data(), v.data(), -1);
  const hone::AdamW<Cpu>& a = plain->adamw();
  BOOST_TEST(rel_l2(m.data(), a.exp_avg(), a.size()) < 1e-6);
  BOOST_TEST(rel_l2(v.data(), a.exp_avg_sq(), a.size()) < 1e-6);
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
  const int64_t n = g.flat.numel();
  hone::DataParallelOptions in_bf16;
  in_bf16.grad_reduce_in_fp32 = false;
  hone::ModelWeights wpf = initial_weights(p), wpb = initial_weights(p);
  const std::unique_ptr<Plain> pf = plain_over(wpf, world), pb = plain_over(wpb, world, in_bf16);
  load_grads(*pf, g);
  load_grads(*pb, g);
  pf->update(1e-3f, 0);  // no clipping: the buffers hold the reduced gradients
  pb->update(1e-3f, 0);
  const double e = rel_l2(pb->grads(), pf->grads(), n);
  BOOST_TEST_MESSAGE("bf16 vs fp32 all-reduce: relative L2 " << e);
  BOOST_TEST(e > 0.0);   // really went through bf16
  BOOST_TEST(e < 8e-3);  // bf16 keeps 8 significant bits: 2^-9 relative per rounding, two roundings
  // The distributed optimizer's bf16 reduce-scatter likewise.
  hone::ModelWeights wf = initial_weights(p), wb = initial_weights(p);
  Zero zf(wf, adamw_config(), world), zb(wb, adamw_config(), world, in_bf16);
  load_grads(zf, g);
  load_grads(zb, g);
  zf.step(1e-3f, 0, wf.flat.f32());
  zb.step(1e-3f, 0, wb.flat.f32());
  const double es = rel_l2(reduced_chunks(zb), reduced_chunks(zf));
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
  Zero zero(w, adamw_config(), world);
  for (int step = 0; step < 2; ++step) {
    loss_and_grads(p, w, h.begin, h.end, g);
    load_grads(zero, g);
    zero.step(1e-2f, 1.0, w.flat.f32());
  }
  const hone::ModelWeights saved_w = [&] {
    hone::ModelWeights c = hone::allocate_weights(p.config);
    hone::convert_copy(w.flat, c.flat);
    return c;
  }();
  const hone::ShardOptimizerState shard = zero.shard_state();
  const size_t n = size_t(p.config.num_parameters());
  std::vector<float> full_m(n), full_v(n);
  zero.read_state(nullptr, full_m.data(), full_v.data(), -1);
  BOOST_TEST(shard.step == 2);

  // The reference third step.
  loss_and_grads(p, w, h.begin, h.end, g);
  load_grads(zero, g);
  zero.step(1e-2f, 1.0, w.flat.f32());

  // Restored from the shard, and from the full state, into fresh optimizers: bitwise the same third step.
  for (const bool from_shard : {true, false}) {
    BOOST_TEST_CONTEXT((from_shard ? "shard state" : "full state")) {
      hone::ModelWeights w2 = hone::allocate_weights(p.config);
      hone::convert_copy(saved_w.flat, w2.flat);
      Zero again(w2, adamw_config(), world);
      if (from_shard)
        again.load_shard_state(shard);
      else
        again.write_state(w2, full_m.data(), full_v.data(), 2);
      BOOST_TEST(again.step_count() == 2);
      hone::ModelWeights g2 = hone::allocate_weights(p.config);
      loss_and_grads(p, w2, h.begin, h.end, g2);
      load_grads(again, g2);
      again.step(1e-2f, 1.0, w2.flat.f32());
      BOOST_TEST(rel_l2(w2.flat.f32(), w.flat.f32(), w.flat.numel()) == 0.0);
    }
  }
  // A shard does not load into another rank's place.
  hone::ShardOptimizerState wrong = shard;
  wrong.dp_rank = 1 - shard.dp_rank;
  BOOST_CHECK_THROW(zero.load_shard_state(wrong), hone::Error);
}

// The clipping norm under tensor parallelism: every rank's weighted sum of squares over what it holds (a replicated
// norm weight counted once over the tp group, a sharded matrix summed), summed over dp and tp. ZeRO-1 sums it per
// bucket chunk: each chunk must be weighted where it lies in the flat buffer (a chunk's values read from another
// place give another norm). Small buckets put chunks all over the buffer, on both dp ranks under -np 4; under -np 2
// dp is 1 and the buckets past the first still start away from 0.
BOOST_AUTO_TEST_CASE(zero1_clipping_norm_under_tensor_parallelism_is_the_whole_models) {
  hone::MpiComm world(MPI_COMM_WORLD, "world");
  BOOST_REQUIRE(world.size() == 2 || world.size() == 4);
  MPI_Comm tp_mpi = MPI_COMM_NULL, dp_mpi = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank() / 2, world.rank(), &tp_mpi);  // pairs of consecutive ranks
  MPI_Comm_split(MPI_COMM_WORLD, world.rank() % 2, world.rank(), &dp_mpi);
  {
    hone::MpiComm tp_comm(tp_mpi, "tp"), dp(dp_mpi, "dp");
    const hone::ModelConfig c = test::tiny_config(hone::Architecture::qwen3, /*tied=*/true);  // replicated norms
    hone::ModelWeights whole = hone::allocate_weights(c);
    test::randomize(whole, 23, 0.2f);
    const auto seqs = test::random_sequences({7, 5, 9}, c.vocab_size, 5);
    const hone::PackedBatch batch = hone::PackedBatch::pack(seqs);
    // Every dp rank the same batch, its loss divided by dp: the sum over dp is the whole batch's gradient.
    std::vector<float> dlp;
    for (int t = 0; t < batch.num_tokens(); ++t) dlp.push_back((1.f + 0.1f * float(t % 5)) / float(dp.size()));

    hone::Transformer one(c, whole);
    one.forward(batch, 1.f, false);
    hone::ModelWeights g_one = hone::allocate_weights(c);
    one.backward(dlp.data(), nullptr, g_one);
    double sq_one = 0;
    for (int64_t i = 0; i < g_one.flat.numel(); ++i) sq_one += double(g_one.flat.f32()[i]) * g_one.flat.f32()[i];
    const double want = std::sqrt(sq_one) * double(dp.size());

    hone::TensorParallel tp(c, tp_comm, /*sequence_parallel=*/false);
    hone::ModelWeights shard = hone::allocate_shard_weights(tp.layout(), c);
    hone::extract_shard(tp.layout(), whole, shard);
    hone::Transformer two(c, shard, &tp);
    two.forward(batch, 1.f, false);
    hone::ModelWeights g = hone::allocate_shard_weights(tp.layout(), c);
    two.backward(dlp.data(), nullptr, g);
    tp.sum_partial_gradients(g);

    const hone::ParamLayout layout = tp.layout().param_layout();
    hone::DataParallelOptions o;
    o.layout = &layout;
    o.bucket_bytes = 2048;  // 512 gradients: a bucket or more per layer
    o.norm.group = &tp_comm;
    o.norm.weighted_sum_squares = [&tp](const float* x, int64_t begin, int64_t n) {
      return tp.weighted_sum_squares(x, begin, n);
    };
    o.norm.sum = [&tp_comm](double x) { return hone::all_reduce_sum_value(tp_comm, x); };
    hone::ModelWeights wz = hone::allocate_shard_weights(tp.layout(), c);
    hone::ModelWeights wp = hone::allocate_shard_weights(tp.layout(), c);
    hone::convert_copy(shard.flat, wz.flat);
    hone::convert_copy(shard.flat, wp.flat);
    Zero zero(wz, adamw_config(), dp, o);
    BOOST_REQUIRE(zero.zero_layout().buckets().size() > 2);
    const std::unique_ptr<Plain> plain = plain_over(wp, dp, o);
    load_grads(zero, g);
    load_grads(*plain, g);
    const double max_norm = 1e-4;  // clipping on: both scale by their norm
    const hone::OptimizerStepResult rz = zero.step(1e-2f, max_norm, wz.flat.f32());
    const hone::OptimizerStepResult rp = plain->step(1e-2f, max_norm, wp.flat.f32());
    BOOST_TEST_MESSAGE("clipping norm: whole model " << want << ", plain " << rp.grad_norm << ", ZeRO-1 "
                                                     << rz.grad_norm);
    BOOST_TEST(want > 0.0);
    BOOST_TEST(std::abs(rp.grad_norm - want) <= 1e-5 * want);
    BOOST_TEST(std::abs(rz.grad_norm - want) <= 1e-5 * want);
    BOOST_TEST(rz.clip_coef < 1.f);
    // The same clipped step: the updated shards agree.
    BOOST_TEST(rel_l2(wz.flat.f32(), wp.flat.f32(), wp.flat.numel()) < 1e-6);
  }
  MPI_Comm_free(&tp_mpi);
  MPI_Comm_free(&dp_mpi);
}

BOOST_AUTO_TEST_SUITE_END()
