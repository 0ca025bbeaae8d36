// The GPU engine's context parallelism on one GPU: two ranks of a cp group run by two threads with their own streams,
// whose device Comm exchanges through the host (pair_device_comm.h: the ring's send_recv, the logprobs' all-gather),
// each running its chunks of the same packed batch with the GPU ring attention (cuDNN per block, merged by the
// log-sum-exp), against the whole model on the same GPU: logprobs and entropies of every row, and the gradients of
// the two ranks summed. Batches with odd lengths, sequences shorter than 2C = 4 tokens, and one long sequence. Also
// selective recompute against none on one GPU. NCCL between GPUs (the overlapped path) is left to mk/gpu-cp-check.sh.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <cmath>
#include <cstdio>
#include <thread>

#include "gpu_transformer_test_util.h"
#include "model/transformer.h"
#include "pair_device_comm.h"
#include "parallel/context_parallel.h"
#include "runtime/error.h"

namespace {

using test::Pair;

struct Result {
  std::vector<float> logprob, entropy, grads;
};

// One forward and backward on this thread's stream: the whole model (pair == nullptr) or this rank's chunks.
Result run(const hone::ModelConfig& c, const hone::ModelWeights& w, const hone::PackedBatch& batch, Pair* pair,
           int rank, hone::Recompute recompute = hone::Recompute::none, bool keep_logits = true) {
  test::ScopedGpuContext g;
  const int T = batch.num_tokens();
  const hone::ParamLayout layout = hone::ParamLayout::of(c);
  std::unique_ptr<test::PairDeviceComm> comm;
  std::unique_ptr<hone::GpuContextParallel> cp;
  if (pair) {
    comm = std::make_unique<test::PairDeviceComm>(*pair, rank, g.ctx.stream);
    cp = std::make_unique<hone::GpuContextParallel>(*comm, g.ctx);
  }
  Result r;
  {
    hone::GpuTransformer model(c, layout, g.ctx, 64, nullptr, hone::ModelSpan{}, nullptr, cp.get());
    model.set_recompute(recompute);
    model.set_keep_logits(keep_logits);
    model.upload_weights(w);
    model.forward(batch, 0.9f, true);
    r.logprob = model.logprobs_host();
    r.entropy = model.entropy_host();
    hone::DeviceArray<float> grads(layout.num_params);
    CUDA_CHECK(cudaMemsetAsync(grads.get(), 0, grads.bytes(), g.ctx.stream));
    const auto dl = test::gpu_logprob_weights(T), de = test::gpu_entropy_weights(T);
    model.backward_host(dl, &de, grads.get());
    r.grads = test::download_f32(grads.get(), layout.num_params);
  }
  return r;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    m = std::max(m, std::isnan(d) ? INFINITY : d);
  }
  return m;
}

void check(hone::Architecture arch, const std::vector<int>& lengths) {
  const hone::ModelConfig c = test::gpu_tiny_config(arch, true);
  const hone::ModelWeights w = test::gpu_test_weights(c, 17);
  const hone::PackedBatch batch = test::gpu_test_batch(lengths, c.vocab_size, 5);
  const Result one = run(c, w, batch, nullptr, 0);
  Pair pair;
  Result part[2];
  std::thread t1([&] { part[1] = run(c, w, batch, &pair, 1); });
  part[0] = run(c, w, batch, &pair, 0);
  t1.join();
  for (int r = 0; r < 2; ++r) {
    BOOST_REQUIRE_EQUAL(part[r].logprob.size(), one.logprob.size());
    const double lp = max_abs_diff(part[r].logprob, one.logprob), en = max_abs_diff(part[r].entropy, one.entropy);
    std::printf("cp=2 rank %d vs one rank (%s, T=%d): logprob max %.3g, entropy max %.3g\n", r,
                hone::architecture_hf_name(arch), batch.num_tokens(), lp, en);
    BOOST_TEST(lp <= 3e-2);
    BOOST_TEST(en <= 3e-2);
    BOOST_TEST(part[r].logprob == part[1 - r].logprob);  // every rank gets the same values
  }
  std::vector<float> sum(part[0].grads.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = part[0].grads[i] + part[1].grads[i];
  const double rel = test::rel_l2_of(sum.data(), one.grads.data(), int64_t(sum.size()));
  std::printf("  gradients summed over the pair vs one rank: relative L2 %.3g\n", rel);
  BOOST_TEST(rel <= 5e-2);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_context_parallel)

BOOST_AUTO_TEST_CASE(qwen3_two_ranks_match_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen3, {37, 1, 64, 20, 9, 3});
}
BOOST_AUTO_TEST_CASE(llama_one_long_sequence, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::llama, {301});
}

// Selective recompute reruns only elementwise ops: the same logprobs (the forward does not change) and gradients
// within bf16 rounding of keeping everything; full recompute likewise.
BOOST_AUTO_TEST_CASE(selective_recompute_matches_none, *boost::unit_test::precondition(test::needs_gpu)) {
  const hone::ModelConfig c = test::gpu_tiny_config(hone::Architecture::qwen3, false);
  const hone::ModelWeights w = test::gpu_test_weights(c, 3);
  const hone::PackedBatch batch = test::gpu_test_batch({40, 7, 13}, c.vocab_size, 2);
  // The LM head forms its logits again in every mode (under none it could keep them: other bf16 roundings).
  const Result none = run(c, w, batch, nullptr, 0, hone::Recompute::none, /*keep_logits=*/false);
  for (hone::Recompute r : {hone::Recompute::selective, hone::Recompute::full}) {
    const Result other = run(c, w, batch, nullptr, 0, r);
    BOOST_TEST(other.logprob == none.logprob);
    const double rel = test::rel_l2_of(other.grads.data(), none.grads.data(), int64_t(none.grads.size()));
    std::printf("recompute %s vs none: gradients relative L2 %.3g\n", hone::recompute_name(r), rel);
    BOOST_TEST(rel <= 1e-3);
  }
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
