// The GPU model's own invariants: a packed batch gives the logprobs and gradients of its sequences run one by one;
// activation recompute changes nothing; one GPU optimizer step (clip + AdamW + refit) equals the CPU AdamW step.
// Tolerances: packed vs single logprobs max abs <= 2e-2 (GEMM shapes differ, so bf16 rounding may too), gradients
// relative L2 <= 2e-2; recompute: logprobs max abs <= 1e-5, gradients relative L2 <= 1e-3 (atomics in gradient
// accumulation may reorder fp32 sums; every mode forms the LM head's logits again); the LM head keeping its logits
// against forming them again: logprobs and entropy equal, gradients relative L2 <= 1e-2 (bf16 rounding of dlogits
// from other values); optimizer (fp32 throughout): relative L2 <= 1e-5 on the master weights.
#include <boost/test/unit_test.hpp>

#include <cstdio>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <functional>

#include "gpu_transformer_test_util.h"
#include "model/transformer.h"
#include "train/adamw.h"
#include "train/all_reduce_adamw.h"
#include "train/grad_clip.h"

namespace {

std::vector<std::vector<int32_t>> split(const hone::PackedBatch& b) {
  std::vector<std::vector<int32_t>> seqs;
  for (int s = 0; s < b.num_seqs(); ++s)
    seqs.emplace_back(b.tokens.begin() + b.seq_begin(s), b.tokens.begin() + b.seq_end(s));
  return seqs;
}

// A tiny untied model on the GPU with a packed batch of three sequences and the loss weights of its tokens: the
// cases that compare passes of one model against each other.
struct TinyGpuModel {
  hone::ModelConfig c;
  hone::ModelWeights w;
  hone::PackedBatch batch;
  int T;
  int64_t N;
  std::vector<float> dl, de;
  test::ScopedGpuContext g;
  hone::GpuTransformer gpu;

  TinyGpuModel(hone::Architecture arch, uint64_t weight_seed, uint32_t batch_seed)
      : c(test::gpu_tiny_config(arch, false)),
        w(test::gpu_test_weights(c, weight_seed)),
        batch(test::gpu_test_batch({25, 40, 3}, c.vocab_size, batch_seed)),
        T(batch.num_tokens()),
        N(w.flat.numel()),
        dl(test::gpu_logprob_weights(T)),
        de(test::gpu_entropy_weights(T)),
        gpu(c, hone::ParamLayout::of(c), g.ctx, T) {
    gpu.upload_weights(w);
  }

  // A forward with a backward to follow, then the backward into zeroed gradients (between_passes runs in between):
  // the logprobs, entropies and gradients.
  struct Pass {
    std::vector<float> logprobs, entropy, grads;
  };
  Pass forward_backward(float temperature, const std::function<void()>& between_passes = {}) {
    hone::DeviceArray<float> gr(N);
    CUDA_CHECK(cudaMemset(gr.get(), 0, gr.bytes()));
    gpu.forward(batch, temperature, true);
    Pass p{gpu.logprobs_host(), gpu.entropy_host(), {}};
    if (between_passes) between_passes();
    gpu.backward_host(dl, &de, gr.get());
    p.grads = test::download_f32(gr.get(), N);
    return p;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_transformer_batching)

BOOST_AUTO_TEST_CASE(packed_equals_one_by_one, *boost::unit_test::precondition(test::needs_gpu)) {
  const hone::ModelConfig c = test::gpu_tiny_config(hone::Architecture::qwen3, true);
  const hone::ModelWeights w = test::gpu_test_weights(c, 21);
  const hone::PackedBatch batch = test::gpu_test_batch({30, 2, 45, 17}, c.vocab_size, 8);
  const int T = batch.num_tokens();
  const int64_t N = w.flat.numel();
  test::ScopedGpuContext g;
  hone::GpuTransformer gpu(c, hone::ParamLayout::of(c), g.ctx, T);
  gpu.upload_weights(w);

  const auto dl = test::gpu_logprob_weights(T);
  hone::DeviceArray<float> packed_grads(N), single_grads(N);
  CUDA_CHECK(cudaMemset(packed_grads.get(), 0, packed_grads.bytes()));
  CUDA_CHECK(cudaMemset(single_grads.get(), 0, single_grads.bytes()));
  gpu.forward(batch, 1.f, false);
  const auto packed = gpu.logprobs_host();
  gpu.backward_host(dl, nullptr, packed_grads.get());

  double max_diff = 0;
  const auto seqs = split(batch);
  for (size_t s = 0; s < seqs.size(); ++s) {
    const hone::PackedBatch one = hone::PackedBatch::pack({seqs[s]});
    gpu.forward(one, 1.f, false);
    const auto lp = gpu.logprobs_host();
    const int begin = batch.seq_begin(int(s));
    const std::vector<float> w_one(dl.begin() + begin, dl.begin() + begin + one.num_tokens());
    gpu.backward_host(w_one, nullptr, single_grads.get());
    for (int t = 0; t < one.num_tokens(); ++t) {
      const double d = std::fabs(double(lp[size_t(t)]) - packed[size_t(begin + t)]);
      max_diff = std::max(max_diff, std::isnan(d) ? INFINITY : d);
    }
  }
  BOOST_TEST(max_diff <= 2e-2);
  const auto a = test::download_f32(packed_grads.get(), N), b = test::download_f32(single_grads.get(), N);
  BOOST_TEST(test::rel_l2_of(a.data(), b.data(), N) <= 2e-2);
}

// The LM head keeping its logits (fp16) for the backward against forming them again: the same logprobs bit for bit
// (one forward kernel), gradients within bf16 rounding (the dlogits round to bf16 from other values: 4-5e-3
// measured; an indexing or scaling error is O(1)), and the kept logits in the forward arena's count.
BOOST_AUTO_TEST_CASE(kept_logits_change_only_rounding, *boost::unit_test::precondition(test::needs_gpu)) {
  TinyGpuModel m(hone::Architecture::qwen3, 33, 11);
  std::vector<TinyGpuModel::Pass> passes;
  size_t bytes[2] = {0, 0};
  for (int keep = 0; keep < 2; ++keep) {
    m.gpu.set_keep_logits(keep == 1);
    bytes[keep] = m.gpu.forward_bytes(m.T);
    passes.push_back(m.forward_backward(0.8f));
  }
  BOOST_TEST(passes[1].logprobs == passes[0].logprobs);
  BOOST_TEST(passes[1].entropy == passes[0].entropy);
  const double rel = test::rel_l2_of(passes[1].grads.data(), passes[0].grads.data(), m.N);
  std::printf("kept logits vs formed again: gradients relative L2 %.3g\n", rel);
  BOOST_TEST(rel <= 1e-2);
  BOOST_TEST(bytes[1] >= bytes[0] + size_t(m.T) * size_t(m.c.vocab_size) * 2);
}

BOOST_AUTO_TEST_CASE(recompute_changes_nothing, *boost::unit_test::precondition(test::needs_gpu)) {
  TinyGpuModel m(hone::Architecture::qwen2, 31, 9);
  hone::GpuTransformer& gpu = m.gpu;
  const int T = m.T;
  gpu.set_keep_logits(false);  // every mode's LM head forms its logits again (kept_logits_change_only_rounding)

  std::vector<TinyGpuModel::Pass> passes;
  for (int mode = 0; mode < 3; ++mode) {  // none, every layer, only layer 0
    gpu.set_recompute(mode == 1);
    if (mode == 2) gpu.set_layer_recompute(0, true);
    // a size query between forward and backward must not disturb the layout
    passes.push_back(m.forward_backward(1.f, [&] { (void)gpu.forward_bytes(2 * T); }));
  }
  const std::vector<float>& lp0 = passes[0].logprobs;
  for (int mode = 1; mode < 3; ++mode) {
    double max_diff = 0;
    for (int t = 0; t < T; ++t)
      max_diff = std::max(max_diff, double(std::fabs(passes[size_t(mode)].logprobs[size_t(t)] - lp0[size_t(t)])));
    BOOST_TEST(max_diff <= 1e-5);
    BOOST_TEST(test::rel_l2_of(passes[size_t(mode)].grads.data(), passes[0].grads.data(), m.N) <= 1e-3);
  }
  // A forward with no backward to follow keeps no activations: same logprobs, and backward is refused.
  gpu.set_recompute(false);
  gpu.forward(m.batch, 1.f, true);  // sizes the arenas for the full layout
  gpu.reset_peaks();
  gpu.forward(m.batch, 1.f, true, /*need_backward=*/false);
  const auto lp_only = gpu.logprobs_host();
  double max_diff = 0;
  for (int t = 0; t < T; ++t) max_diff = std::max(max_diff, double(std::fabs(lp_only[size_t(t)] - lp0[size_t(t)])));
  BOOST_TEST(max_diff <= 1e-5);
  hone::DeviceArray<float> unused(m.N);
  BOOST_CHECK_THROW(gpu.backward_host(m.dl, &m.de, unused.get()), hone::Error);
  BOOST_TEST(gpu.forward_arena_peak() < gpu.forward_bytes(T));

  // Recompute saves memory: one layer's activations are shared instead of saved per layer.
  gpu.set_recompute(false);
  const size_t all_saved = gpu.forward_bytes(T);
  gpu.set_recompute(true);
  BOOST_TEST(gpu.forward_bytes(T) < all_saved);
}

BOOST_AUTO_TEST_CASE(optimizer_step_equals_cpu_adamw, *boost::unit_test::precondition(test::needs_gpu)) {
  const hone::ModelConfig c = test::gpu_tiny_config(hone::Architecture::qwen2, true);
  hone::ModelWeights w = test::gpu_test_weights(c, 41);
  const int64_t N = w.flat.numel();
  hone::AdamWConfig cfg;
  cfg.weight_decay = 0.1f;
  test::ScopedGpuContext g;
  hone::AllReduceAdamW<hone::CudaBackend> gopt(w, cfg, nullptr, {}, hone::CudaBackend::Exec(g.ctx));  // one GPU
  hone::AdamW<hone::CpuBackend> copt(w, cfg);
  hone::DeviceArray<hone::bf16> compute(N);

  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.f, 0.05f);
  const double max_norm = 1.0;
  for (int step = 0; step < 2; ++step) {
    std::vector<float> grad(static_cast<size_t>(N));
    for (float& x : grad) x = nd(rng);
    CUDA_CHECK(cudaMemcpy(gopt.grads(), grad.data(), size_t(N) * 4, cudaMemcpyHostToDevice));
    const double cpu_norm = hone::clip_grad_norm(grad.data(), N, max_norm);  // norm > 1: clipping is active
    copt.step(w.flat.f32(), grad.data(), 1e-3f);
    const hone::OptimizerStepResult r = gopt.step(1e-3f, max_norm, compute.get());
    BOOST_TEST(std::fabs(r.grad_norm - cpu_norm) <= 1e-6 * cpu_norm);
    BOOST_TEST(r.clip_coef < 1.f);
  }
  BOOST_TEST(gopt.step_count() == 2);
  const auto master = test::download_f32(gopt.master(), N);
  BOOST_TEST(test::rel_l2_of(master.data(), w.flat.f32(), N) <= 1e-5);
  const auto m = test::download_f32(gopt.adamw().exp_avg(), N);
  BOOST_TEST(test::rel_l2_of(m.data(), copt.exp_avg(), N) <= 1e-5);

  // Refit: the compute weights are the master weights rounded to bf16.
  std::vector<hone::bf16> cw(static_cast<size_t>(N));
  CUDA_CHECK(cudaMemcpy(cw.data(), compute.get(), size_t(N) * sizeof(hone::bf16), cudaMemcpyDeviceToHost));
  int64_t off_by_more = 0;
  for (int64_t i = 0; i < N; ++i)
    if (std::fabs(float(cw[size_t(i)]) - master[size_t(i)]) > std::fabs(master[size_t(i)]) * (1.f / 256.f))
      ++off_by_more;
  BOOST_TEST(off_by_more == 0);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
