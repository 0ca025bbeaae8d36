// The GPU engine's tensor-parallel model on one GPU: two shards of a small model (Megatron's split, the
// vocabulary-parallel embedding and LM head), run by two threads with their own streams, whose device Comm sums,
// maxes, gathers and scatters through the host (pair_device_comm.h), against the whole model on the same GPU:
// logprobs, entropies, every gradient slice (the partial ones summed on the device), the gradient norm over the
// shards and one clipped AdamW step. Whole rows, and sequence parallelism (131 tokens: one of padding) without and
// with the overlapped collectives (four uneven chunks on a communication stream), with activation recompute too.
// This proves the GPU layer body's hooks, the tensor-parallel group's collectives (the overlapped ones of
// backend/sequence_overlap.h too) and their stream order, and the shard's parameter layout with one GPU; NCCL
// between GPUs is the only part it leaves to a machine with several (mk/gpu-tp-check.sh).
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <cmath>
#include <cstdio>
#include <thread>

#include "gpu_transformer_test_util.h"
#include "pair_device_comm.h"
#include "model/transformer.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel.h"
#include "runtime/error.h"
#include "tensor/dtype.h"
#include "train/all_reduce_adamw.h"

namespace {

using test::Pair;

struct Result {
  std::vector<float> logprob, entropy, grads;  // shards: after the partial gradients' sum over the pair
  double sum_squares = 0;                      // shards: weighted (replicated values count once over the pair)
  double grad_norm = 0;                        // the optimizer's clipping norm (over the pair for shards)
  std::vector<float> stepped;                  // master weights after one clipped AdamW step
  int collectives = 0;                         // shards: collectives issued over the pair
};

// How a case runs the shards.
struct Case {
  hone::SequenceParallelism sp;
  bool recompute = false;
};

constexpr double kMaxNorm = 0.05;  // below the gradient norm: the step clips

// One model pass on this thread's stream: the whole model (tp == nullptr) or this rank's shard.
Result run(const hone::ModelConfig& c, const hone::ModelWeights& whole, const hone::PackedBatch& batch, Pair* pair,
           int rank, const Case& how = {}) {
  test::ScopedGpuContext g;
  const int T = batch.num_tokens();
  const test::PairRank me(c, whole, pair, rank, g.ctx, how.sp);
  hone::GpuTensorParallel* tp = me.tp.get();
  const hone::ParamLayout& layout = me.layout;
  const hone::ModelWeights& w = me.weights;
  hone::GpuTransformer model(c, layout, g.ctx, 64, tp);
  model.set_recompute(how.recompute);
  model.upload_weights(w);
  model.forward(batch, 0.9f, true);
  Result r;
  r.logprob = model.logprobs_host();
  r.entropy = model.entropy_host();
  // The engine's optimizer on the shard: the clipping norm weighted per shard and summed over the pair.
  hone::DataParallelOptions po;
  po.layout = &layout;
  if (tp) po.norm = tp->sharded_norm();
  hone::AllReduceAdamW<hone::CudaBackend> opt(w, hone::AdamWConfig{}, nullptr, po, hone::CudaBackend::Exec(g.ctx));
  opt.zero_grads();
  float* grads = opt.grads();
  const auto dl = test::gpu_logprob_weights(T), de = test::gpu_entropy_weights(T);
  model.backward_host(dl, &de, grads);
  if (tp) {
    tp->sum_partial_gradients(grads);
    r.sum_squares = tp->weighted_sum_squares(grads, 0, layout.num_params);
  }
  r.grads = test::download_f32(grads, layout.num_params);
  r.grad_norm = opt.update(1e-2f, kMaxNorm).grad_norm;
  // A buffer of its own: copies of ModelWeights share their storage, and w may be the caller's.
  hone::ModelWeights stepped = tp ? hone::allocate_shard_weights(tp->layout(), c) : hone::allocate_weights(c);
  opt.read_state(&stepped, std::vector<float>(size_t(layout.num_params)).data(),
                 std::vector<float>(size_t(layout.num_params)).data(), 0);
  r.stepped.assign(stepped.flat.f32(), stepped.flat.f32() + stepped.flat.numel());
  if (me.comm) r.collectives = me.comm->collectives();
  return r;
}

// Runs the pair; returns rank 0's collectives count.
int check(hone::Architecture arch, bool tied, int kv_heads = 2, const Case& how = {}) {
  hone::ModelConfig c = test::gpu_tiny_config(arch, tied);
  c.num_key_value_heads = kv_heads;  // 1: one KV head replicated over the two ranks
  const hone::ModelWeights w = test::gpu_test_weights(c, 13);
  const hone::PackedBatch batch = test::gpu_test_batch({37, 1, 64, 20, 9}, c.vocab_size, 7);
  const int T = batch.num_tokens();
  const Result one = run(c, w, batch, nullptr, 0);
  Pair pair;
  Result part[2];
  std::thread t1([&] { part[1] = run(c, w, batch, &pair, 1, how); });
  part[0] = run(c, w, batch, &pair, 0, how);
  t1.join();
  std::printf("tp=2%s%s%s: %d collectives a rank\n", how.sp.on ? ", sequence parallel" : "",
              how.sp.on && how.sp.overlap ? ", overlapped" : "", how.recompute ? ", recompute" : "",
              part[0].collectives);
  BOOST_TEST(part[0].collectives == part[1].collectives);

  for (int r = 0; r < 2; ++r) {
    double max_lp = 0, max_ent = 0;
    for (int t = 0; t < T; ++t) {
      const double a = std::fabs(double(part[r].logprob[size_t(t)]) - one.logprob[size_t(t)]);
      const double b = std::fabs(double(part[r].entropy[size_t(t)]) - one.entropy[size_t(t)]);
      max_lp = std::max(max_lp, std::isnan(a) ? INFINITY : a);
      max_ent = std::max(max_ent, std::isnan(b) ? INFINITY : b);
    }
    std::printf("tp=2 rank %d vs one rank (%s%s, T=%d): logprob max %.3g, entropy max %.3g\n", r,
                hone::architecture_hf_name(arch), tied ? ", tied" : "", T, max_lp, max_ent);
    BOOST_TEST(max_lp <= 3e-2);
    BOOST_TEST(max_ent <= 3e-2);
    BOOST_TEST(part[r].logprob == part[1 - r].logprob);  // every rank gets the same values
  }
  // Every rank's gradient slice (the partial ones summed over the pair: q/k norm weights, a replicated KV head)
  // against the whole model's, and the weighted sums of squares of the two shards against the whole one's.
  for (int r = 0; r < 2; ++r) {
    const hone::ShardLayout L = hone::ShardLayout::of(c, 2, r);
    std::vector<float> expect(size_t(L.num_local_params()));
    hone::extract_shard_flat(L, one.grads.data(), expect.data());
    for (const hone::ParamShard& p : L.params()) {
      const double rel = test::rel_l2_of(part[r].grads.data() + p.offset, expect.data() + p.offset, p.local_numel());
      BOOST_TEST_INFO("rank " << r << " " << p.spec.name);
      BOOST_TEST(rel <= 5e-2);
    }
  }
  double whole = 0;
  for (float g : one.grads) whole += double(g) * g;
  const double sharded = part[0].sum_squares + part[1].sum_squares;
  std::printf("  gradient norm: shards %.6g, whole %.6g\n", std::sqrt(sharded), std::sqrt(whole));
  BOOST_TEST(std::abs(std::sqrt(sharded) - std::sqrt(whole)) <= 2e-2 * std::sqrt(whole));
  // One clipped AdamW step: both ranks clip by the same norm over the pair (the whole model's), and each rank's
  // stepped master weights are the whole model's stepped weights' slices.
  std::printf("  optimizer norm: ranks %.6g %.6g, whole %.6g\n", part[0].grad_norm, part[1].grad_norm, one.grad_norm);
  BOOST_TEST(one.grad_norm > kMaxNorm);
  BOOST_TEST(part[0].grad_norm == part[1].grad_norm);
  BOOST_TEST(std::abs(part[0].grad_norm - one.grad_norm) <= 2e-2 * one.grad_norm);
  for (int r = 0; r < 2; ++r) {
    const hone::ShardLayout L = hone::ShardLayout::of(c, 2, r);
    std::vector<float> expect(size_t(L.num_local_params()));
    hone::extract_shard_flat(L, one.stepped.data(), expect.data());
    double max_diff = 0;
    for (size_t i = 0; i < expect.size(); ++i)
      max_diff = std::max(max_diff, double(std::fabs(part[r].stepped[i] - expect[i])));
    // AdamW's first step moves each weight by about lr * sign(g): a sign flip of a tiny gradient is 2 * lr.
    BOOST_TEST(max_diff <= 2.5e-2, "rank " << r << " stepped weights differ by " << max_diff);
  }
  return part[0].collectives;
}

Case sequence_parallel(bool overlap, bool recompute = false) {
  Case how;
  how.sp.on = true;
  how.sp.overlap = overlap;
  how.sp.chunks = 4;  // 131 tokens padded to 132: 66 rows a rank, in chunks of 17, 17, 16 and 16
  how.recompute = recompute;
  return how;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_tensor_parallel)

BOOST_AUTO_TEST_CASE(qwen3_two_shards_match_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen3, true);
}
BOOST_AUTO_TEST_CASE(qwen2_two_shards_match_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen2, false);
}
BOOST_AUTO_TEST_CASE(replicated_kv_head_matches_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen3, false, 1);
}

// Sequence parallelism: the residual stream on 66 of the 132 rows each, the same numbers as the whole model.
BOOST_AUTO_TEST_CASE(sequence_parallel_shards_match_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  const int plain = check(hone::Architecture::qwen3, true, 2, sequence_parallel(false));
  // Overlapped: every layer collective in four chunks on the communication stream.
  const int chunked = check(hone::Architecture::qwen3, true, 2, sequence_parallel(true));
  BOOST_TEST(chunked > plain);
}
BOOST_AUTO_TEST_CASE(overlapped_sequence_parallel_qwen2_matches, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen2, false, 2, sequence_parallel(true));
}
BOOST_AUTO_TEST_CASE(overlapped_sequence_parallel_with_recompute_and_a_replicated_kv_head,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen3, false, 1, sequence_parallel(true, /*recompute=*/true));
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
