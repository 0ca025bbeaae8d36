// The whole model on the GPU against the fp32 CPU Transformer on the same (bf16-rounded) weights: logprobs and
// entropies (absolute error), and parameter gradients (cosine similarity per tensor, relative L2 on the flat
// buffer), for a Qwen3-like (q/k norm), a Qwen2-like (biases) and a Llama-like (tied embeddings) model.
// Tolerances (about a dozen bf16 roundings of the activations per layer, two layers; logits of std ~0.5):
// logprob/entropy max abs <= 3e-2, mean abs <= 5e-3;
// gradient cosine >= 0.99 per tensor, flat relative L2 <= 5e-2.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpu_transformer_test_util.h"
#include "model/transformer.h"
#include "model/transformer.h"

namespace {

void check_against_cpu(hone::Architecture arch, bool tied, float temperature) {
  const hone::ModelConfig c = test::gpu_tiny_config(arch, tied);
  const hone::ModelWeights w = test::gpu_test_weights(c, 11);
  const hone::PackedBatch batch = test::gpu_test_batch({37, 1, 64, 20, 9}, c.vocab_size, 5);
  const int T = batch.num_tokens();
  const auto dl = test::gpu_logprob_weights(T), de = test::gpu_entropy_weights(T);

  hone::Transformer cpu(c, w);
  cpu.forward(batch, temperature, true);
  hone::ModelWeights cpu_grads = hone::allocate_weights(c);
  const std::vector<float> cpu_lp(cpu.logprobs(), cpu.logprobs() + T);
  const std::vector<float> cpu_ent(cpu.entropy(), cpu.entropy() + T);
  cpu.backward(dl.data(), de.data(), cpu_grads);

  test::ScopedGpuContext g;
  hone::GpuTransformer gpu(c, hone::ParamLayout::of(c), g.ctx, 64);  // smaller than T: the arenas must grow
  gpu.upload_weights(w);
  gpu.forward(batch, temperature, true);
  const auto lp = gpu.logprobs_host(), ent = gpu.entropy_host();
  hone::DeviceArray<float> grads(w.flat.numel());
  CUDA_CHECK(cudaMemset(grads.get(), 0, grads.bytes()));
  gpu.backward_host(dl, &de, grads.get());
  const auto gg = test::download_f32(grads.get(), grads.size());

  double max_lp = 0, mean_lp = 0, max_ent = 0, mean_ent = 0;
  for (int t = 0; t < T; ++t) {
    const double a = std::fabs(double(lp[size_t(t)]) - cpu_lp[size_t(t)]);
    const double b = std::fabs(double(ent[size_t(t)]) - cpu_ent[size_t(t)]);
    max_lp = std::max(max_lp, std::isnan(a) ? INFINITY : a);
    max_ent = std::max(max_ent, std::isnan(b) ? INFINITY : b);
    mean_lp += a / T;
    mean_ent += b / T;
    if (batch.targets[size_t(t)] < 0) BOOST_TEST(lp[size_t(t)] == 0.f);
  }
  std::printf("gpu vs cpu (%s%s, T=%d): logprob max %.3g mean %.3g; entropy max %.3g mean %.3g\n",
              hone::architecture_hf_name(arch), tied ? ", tied" : "", T, max_lp, mean_lp, max_ent, mean_ent);
  BOOST_TEST(max_lp <= 3e-2);
  BOOST_TEST(mean_lp <= 5e-3);
  BOOST_TEST(max_ent <= 3e-2);
  BOOST_TEST(mean_ent <= 5e-3);

  const double flat = test::rel_l2_of(gg.data(), cpu_grads.flat.f32(), w.flat.numel());
  std::printf("  gradient relative L2 (flat) %.3g\n", flat);
  BOOST_TEST(flat <= 5e-2);
  for (const auto& [name, t] : cpu_grads.named_parameters()) {
    const int64_t off = t.f32() - cpu_grads.flat.f32();
    const double cs = test::cosine(gg.data() + off, t.f32(), t.numel());
    BOOST_TEST_INFO("parameter " << name);
    BOOST_TEST(cs >= 0.99);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_transformer)

BOOST_AUTO_TEST_CASE(qwen3_qk_norm_matches_cpu, *boost::unit_test::precondition(test::needs_gpu)) {
  check_against_cpu(hone::Architecture::qwen3, false, 1.f);
}

BOOST_AUTO_TEST_CASE(qwen2_biases_match_cpu, *boost::unit_test::precondition(test::needs_gpu)) {
  check_against_cpu(hone::Architecture::qwen2, false, 0.7f);
}

BOOST_AUTO_TEST_CASE(llama_tied_matches_cpu, *boost::unit_test::precondition(test::needs_gpu)) {
  check_against_cpu(hone::Architecture::llama, true, 1.f);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
