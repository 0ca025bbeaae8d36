// The GPU engine's tensor-parallel model on one GPU: two shards of a small model (Megatron's split, the
// vocabulary-parallel embedding and LM head), run by two threads with their own streams, whose device Comm sums
// and maxes through the host, against the whole model on the same GPU: logprobs, entropies, every gradient slice
// (the partial ones summed on the device) and the gradient norm over the shards. This proves the GPU layer body's hooks,
// GpuTensorParallel's collectives and the shard's parameter layout with one GPU; NCCL between GPUs is the only
// part it leaves to a machine with several.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <barrier>
#include <cmath>
#include <cstdio>
#include <thread>

#include "gpu_transformer_test_util.h"
#include "model/gpu_transformer.h"
#include "parallel/gpu_tensor_parallel.h"
#include "parallel/shard_weights.h"
#include "runtime/error.h"
#include "tensor/dtype.h"

namespace {

struct Pair {
  std::barrier<> sync{2};
  std::vector<float> posted[2];
};

// Two "ranks" of one GPU: a collective synchronizes the caller's stream, posts its values on the host, and both
// ranks combine them in rank order (the same bits on both).
class PairDeviceComm final : public hone::Comm {
 public:
  PairDeviceComm(Pair& p, int rank, cudaStream_t stream) : p_(p), rank_(rank), stream_(stream) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  const std::string& name() const override { return name_; }
  bool on_device() const override { return true; }
  void all_reduce_sum_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    combine(send, recv, n, t, [](float a, float b) { return a + b; });
  }
  void all_reduce_max_raw(const void* send, void* recv, int64_t n, hone::CommType t) override {
    combine(send, recv, n, t, [](float a, float b) { return std::max(a, b); });
  }
  void all_reduce_min_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_reduce_min"); }
  void reduce_scatter_sum_raw(const void*, void*, int64_t, hone::CommType) override { unused("reduce_scatter"); }
  void all_gather_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_gather"); }
  void broadcast_raw(void*, int64_t, hone::CommType, int) override { unused("broadcast"); }
  void barrier() override { p_.sync.arrive_and_wait(); }
  void send_raw(const void*, int64_t, hone::CommType, int) override { unused("send"); }
  void recv_raw(void*, int64_t, hone::CommType, int) override { unused("recv"); }
  void send_recv_raw(const void*, int64_t, int, void*, int64_t, int, hone::CommType) override { unused("send_recv"); }
  void all_to_all_raw(const void*, void*, int64_t, hone::CommType) override { unused("all_to_all"); }
  void all_to_allv_raw(const void*, std::span<const int64_t>, std::span<const int64_t>, void*,
                       std::span<const int64_t>, std::span<const int64_t>, hone::CommType) override {
    unused("all_to_allv");
  }

 private:
  static void unused(const char* op) { HONE_CHECK(false, op, " is not used by tensor parallelism"); }
  template <class Op>
  void combine(const void* send, void* recv, int64_t n, hone::CommType t, Op op) {
    HONE_CHECK(t == hone::CommType::f32 || t == hone::CommType::bf16, "f32 and bf16 only");
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<float>& mine = p_.posted[rank_];
    mine.resize(size_t(n));
    if (t == hone::CommType::f32) {
      CUDA_CHECK(cudaMemcpy(mine.data(), send, size_t(n) * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      CUDA_CHECK(cudaMemcpy(h.data(), send, size_t(n) * 2, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < n; ++i) mine[size_t(i)] = hone::bf16_to_f32(h[size_t(i)]);
    }
    p_.sync.arrive_and_wait();
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = op(p_.posted[0][size_t(i)], p_.posted[1][size_t(i)]);
    p_.sync.arrive_and_wait();  // both read before either posts again
    if (t == hone::CommType::f32) {
      CUDA_CHECK(cudaMemcpy(recv, out.data(), size_t(n) * 4, cudaMemcpyHostToDevice));
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) h[size_t(i)] = hone::f32_to_bf16(out[size_t(i)]);
      CUDA_CHECK(cudaMemcpy(recv, h.data(), size_t(n) * 2, cudaMemcpyHostToDevice));
    }
  }
  Pair& p_;
  int rank_;
  cudaStream_t stream_;
  std::vector<int> ranks_{0, 1};
  std::string name_ = "tp (two threads)";
};

struct Result {
  std::vector<float> logprob, entropy, grads;  // shards: after the partial gradients' sum over the pair
  double sum_squares = 0;                      // shards: weighted (replicated values count once over the pair)
};

// One model pass on this thread's stream: the whole model (tp == nullptr) or this rank's shard.
Result run(const hone::ModelConfig& c, const hone::ModelWeights& whole, const hone::PackedBatch& batch, Pair* pair,
           int rank) {
  test::ScopedGpuContext g;
  const int T = batch.num_tokens();
  std::unique_ptr<PairDeviceComm> comm;
  std::unique_ptr<hone::GpuTensorParallel> tp;
  hone::ParamLayout layout = hone::ParamLayout::of(c);
  hone::ModelWeights w = whole;
  if (pair) {
    comm = std::make_unique<PairDeviceComm>(*pair, rank, g.ctx.stream);
    tp = std::make_unique<hone::GpuTensorParallel>(c, *comm, g.ctx);
    layout = tp->layout().param_layout();
    w = hone::allocate_shard_weights(tp->layout(), c);
    hone::extract_shard(tp->layout(), whole, w);
  }
  hone::GpuTransformer model(c, layout, g.ctx, 64, tp.get());
  model.upload_weights(w);
  model.forward(batch, 0.9f, true);
  Result r{model.logprobs_host(), model.entropy_host(), {}};
  hone::DeviceArray<float> grads(layout.num_params);
  CUDA_CHECK(cudaMemset(grads.get(), 0, grads.bytes()));
  const auto dl = test::gpu_logprob_weights(T), de = test::gpu_entropy_weights(T);
  model.backward_host(dl, &de, grads.get());
  if (tp) {
    tp->sum_partial_gradients(grads.get());
    r.sum_squares = tp->weighted_sum_squares(grads.get(), 0, grads.size());
  }
  r.grads = test::download_f32(grads.get(), grads.size());
  return r;
}

void check(hone::Architecture arch, bool tied, int kv_heads = 2) {
  hone::ModelConfig c = test::gpu_tiny_config(arch, tied);
  c.num_key_value_heads = kv_heads;  // 1: one KV head replicated over the two ranks
  const hone::ModelWeights w = test::gpu_test_weights(c, 13);
  const hone::PackedBatch batch = test::gpu_test_batch({37, 1, 64, 20, 9}, c.vocab_size, 7);
  const int T = batch.num_tokens();
  const Result one = run(c, w, batch, nullptr, 0);
  Pair pair;
  Result part[2];
  std::thread t1([&] { part[1] = run(c, w, batch, &pair, 1); });
  part[0] = run(c, w, batch, &pair, 0);
  t1.join();

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

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
