// A mixture of experts (Qwen3-MoE: 8 experts of width 64, 2 per token, a dense layer between two sparse ones) on
// the GPU against the fp32 CPU Transformer on the same bf16-rounded weights:
//   * the GPU forward replaying the CPU's routing (a bf16 activation can flip a near tie between two experts): the
//     logprobs (max abs <= 3e-2, mean <= 5e-3), the load-balancing loss (relative 1e-2) and every parameter's
//     gradient with the loss's gradient in it (cosine >= 0.99, flat relative L2 <= 5e-2), as the dense models';
//   * the GPU routing on its own agrees with the CPU's on >= 95% of the (token, layer) pairs;
//   * generation: greedy decoding through the paged cache and CUDA graphs records every fed token's experts, and
//     replaying them in the training forward gives the generation logprobs back (token_mult_prob_error <= 1.01).
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "generation/generator.h"
#include "gpu_transformer_test_util.h"
#include "model/moe_feed_forward.h"
#include "model/transformer.h"

namespace {

hone::ModelConfig moe_config() {
  hone::ModelConfig c = test::gpu_tiny_config(hone::Architecture::qwen3, false);
  c.arch = hone::Architecture::qwen3_moe;
  c.num_hidden_layers = 3;
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  c.norm_topk_prob = true;
  c.mlp_only_layers = {1};
  c.validate();
  return c;
}

// Routers of std 0.3 (logits of a few units: near ties rare) over the test weights.
hone::ModelWeights moe_weights(const hone::ModelConfig& c, uint64_t seed) {
  hone::ModelWeights w = test::gpu_test_weights(c, seed, 0.05f);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    hone::Tensor& r = w.layers[size_t(l)].router;
    if (!r.defined()) continue;
    for (int64_t i = 0; i < r.numel(); ++i) r.f32()[i] = test::bf16_round(r.f32()[i] * 6.f);
  }
  return w;
}

int routing_width(const hone::ModelConfig& c) { return c.num_moe_layers() * c.num_experts_per_tok; }

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_moe)

BOOST_AUTO_TEST_CASE(matches_cpu_with_the_cpu_routing, *boost::unit_test::precondition(test::needs_gpu)) {
  const hone::ModelConfig c = moe_config();
  const hone::ModelWeights w = moe_weights(c, 21);
  const hone::PackedBatch batch = test::gpu_test_batch({37, 1, 64, 20, 9}, c.vocab_size, 5);
  const int T = batch.num_tokens(), W = routing_width(c);
  const auto dl = test::gpu_logprob_weights(T);
  const double aux_weight = 0.3;

  hone::Transformer cpu(c, w);
  std::vector<int32_t> cpu_routing(size_t(T) * W);
  hone::MoeRouting cpu_r;
  cpu_r.record = cpu_routing.data();
  cpu_r.aux_loss_weight = aux_weight;
  cpu.forward(batch, 1.f, false, true, nullptr, cpu_r);
  const std::vector<float> cpu_lp(cpu.logprobs(), cpu.logprobs() + T);
  const double cpu_aux = cpu.moe()->aux_loss({});
  hone::ModelWeights cpu_grads = hone::allocate_weights(c);
  cpu.backward(dl.data(), nullptr, cpu_grads);

  test::ScopedGpuContext g;
  hone::GpuTransformer gpu(c, hone::ParamLayout::of(c), g.ctx, 64);
  gpu.upload_weights(w);
  hone::DeviceArray<int32_t> forced(int64_t(T) * W), record(int64_t(T) * W);
  CUDA_CHECK(cudaMemcpy(forced.get(), cpu_routing.data(), cpu_routing.size() * 4, cudaMemcpyHostToDevice));

  // Its own routing first: how often it agrees with the CPU's.
  hone::MoeRouting own_r;
  own_r.record = record.get();
  gpu.forward(batch, 1.f, false, false, nullptr, own_r);
  std::vector<int32_t> own(cpu_routing.size());
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(own.data(), record.get(), own.size() * 4, cudaMemcpyDeviceToHost));
  int64_t same = 0;
  for (int64_t r = 0; r < int64_t(T) * c.num_moe_layers(); ++r) {
    std::vector<int32_t> a(own.begin() + r * 2, own.begin() + r * 2 + 2), b(cpu_routing.begin() + r * 2,
                                                                             cpu_routing.begin() + r * 2 + 2);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    same += a == b;
  }
  const double agree = double(same) / double(int64_t(T) * c.num_moe_layers());
  std::printf("gpu vs cpu routing: %.4f of (token, layer) pairs route to the same experts\n", agree);
  BOOST_TEST(agree >= 0.95);

  // The CPU's routing replayed: the same experts, so the rest compares as for a dense model.
  hone::MoeRouting replay_r;
  replay_r.forced = forced.get();
  replay_r.aux_loss_weight = aux_weight;
  gpu.forward(batch, 1.f, false, true, nullptr, replay_r);
  const auto lp = gpu.logprobs_host();
  hone::DeviceArray<float> grads(w.flat.numel());
  CUDA_CHECK(cudaMemset(grads.get(), 0, grads.bytes()));
  gpu.backward_host(dl, nullptr, grads.get());
  const auto gg = test::download_f32(grads.get(), grads.size());
  const double gpu_aux = gpu.moe()->aux_loss(g.ctx);

  double max_lp = 0, mean_lp = 0;
  for (int t = 0; t < T; ++t) {
    const double a = std::fabs(double(lp[size_t(t)]) - cpu_lp[size_t(t)]);
    max_lp = std::max(max_lp, std::isnan(a) ? INFINITY : a);
    mean_lp += a / T;
  }
  std::printf("gpu vs cpu (qwen3_moe, T=%d): logprob max %.3g mean %.3g; aux loss %.6g vs %.6g\n", T, max_lp, mean_lp,
              gpu_aux, cpu_aux);
  BOOST_TEST(max_lp <= 3e-2);
  BOOST_TEST(mean_lp <= 5e-3);
  BOOST_TEST(std::fabs(gpu_aux - cpu_aux) <= 1e-2 * std::fabs(cpu_aux));
  const double flat = test::rel_l2_of(gg.data(), cpu_grads.flat.f32(), w.flat.numel());
  std::printf("  gradient relative L2 (flat) %.3g\n", flat);
  BOOST_TEST(flat <= 5e-2);
  for (const auto& [name, t] : cpu_grads.named_parameters()) {
    const int64_t off = t.f32() - cpu_grads.flat.f32();
    BOOST_TEST_INFO("parameter " << name);
    BOOST_TEST(test::cosine(gg.data() + off, t.f32(), t.numel()) >= 0.99);
  }
}

BOOST_AUTO_TEST_CASE(generation_records_its_routing_and_replays_into_training,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  const hone::ModelConfig c = moe_config();
  hone::ModelWeights w = moe_weights(c, 33);
  for (int64_t i = 0; i < w.lm_head.numel(); ++i) w.lm_head.f32()[i] = test::bf16_round(w.lm_head.f32()[i] * 5.f);
  test::ScopedGpuContext g;
  hone::GpuTransformer gpu(c, hone::ParamLayout::of(c), g.ctx, 512);
  gpu.upload_weights(w);
  hone::GenerationOptions o;
  o.kv_cache_gib = 0.05;
  o.cuda_graphs = true;
  hone::Generator<hone::CudaBackend> gen(c, hone::ParamLayout::of(c), gpu.weights(), g.ctx, o);
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 11, 3}, {7, 1, 2, 3, 4, 5, 6, 8, 10}, {40}};
  const auto requests = hone::group_requests(prompts, 3, 0);
  hone::SamplingParams sp;
  sp.greedy = true;
  hone::StopCriteria stop;
  stop.max_new_tokens = 12;
  const auto out = gen.generate(requests, sp, stop, 7, 1, 64);
  const int W = routing_width(c);
  double mpe = 0;
  int64_t n = 0;
  for (const hone::Rollout& r : out) {
    const size_t rows = r.prompt.size() + r.completion.size() - 1;
    BOOST_TEST_REQUIRE(r.routing.size() == rows * size_t(W));
    std::vector<int32_t> ids(r.prompt);
    ids.insert(ids.end(), r.completion.begin(), r.completion.end());
    const hone::PackedBatch b = hone::PackedBatch::pack({ids});
    std::vector<int32_t> forced(size_t(b.num_tokens()) * W, -1);
    std::copy(r.routing.begin(), r.routing.end(), forced.begin());
    hone::DeviceArray<int32_t> d(int64_t(forced.size()));
    CUDA_CHECK(cudaMemcpy(d.get(), forced.data(), forced.size() * 4, cudaMemcpyHostToDevice));
    hone::MoeRouting replay;
    replay.forced = d.get();
    gpu.forward(b, 1.f, false, false, nullptr, replay);
    const auto lp = gpu.logprobs_host();
    for (size_t j = 0; j < r.completion.size(); ++j) {
      mpe += std::exp(std::fabs(double(lp[r.prompt.size() - 1 + j]) - r.logprobs[j]));
      ++n;
    }
  }
  const double err = mpe / double(n);
  std::printf("generation vs the replayed training forward: token_mult_prob_error %.5f over %lld tokens\n", err,
              (long long)n);
  BOOST_TEST(err <= 1.01);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
