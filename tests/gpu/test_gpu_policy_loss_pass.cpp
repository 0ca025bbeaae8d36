// The policy loss pass over the two backends (rl/policy_loss_pass.h): the same micro-batches through
// PolicyLossPass<CudaBackend> (the GPU engine's: arrays uploaded to the device, statistics copied into pinned host
// memory and read once after the last micro-batch) and PolicyLossPass<CpuBackend> (the CPU engine's): the same
// metrics and gradients within the op check's tolerance (check_policy_loss.cpp: both compute in double from the
// same fp32 inputs). Two steps on one pass, the second with more and longer micro-batches than the first, so its
// device buffers and pinned statistics grow; the loss options cover the KL term, the entropy gradient, importance
// sampling, both aggregations and the exactly on-policy case.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gpu_transformer_test_util.h"
#include "rl/policy_loss_pass.h"

namespace {

using hone::rl::MicroBatch;
using hone::rl::TrainLoss;

// One micro-batch of `lengths` sequences with random logprobs, a masked prompt at the start of each sequence, and
// the forward's outputs (new logprobs, entropies) beside it.
struct Input {
  MicroBatch mb;
  std::vector<float> now, entropy;
};

Input draw(const std::vector<int>& lengths, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::normal_distribution<float> nd(0.f, 1.f);
  Input in;
  MicroBatch& mb = in.mb;
  mb.seq_offsets = {0};
  for (int n : lengths) {
    mb.batch.append(std::vector<int32_t>(size_t(n), 1));
    const int prompt = n / 3;
    for (int t = 0; t < n; ++t) {
      const float o = -5.f * u01(rng) - 0.01f;
      mb.old.push_back(o);
      in.now.push_back(o + 0.3f * nd(rng));
      mb.gen.push_back(o + 0.1f * nd(rng));
      mb.ref.push_back(in.now.back() + 0.5f * nd(rng));
      in.entropy.push_back(4.f * u01(rng));
      mb.mask.push_back(t >= prompt ? 1 : 0);
    }
    mb.advantages.push_back(nd(rng));
    mb.seq_offsets.push_back(int64_t(in.now.size()));
  }
  return in;
}

struct Outcome {
  std::vector<hone::PolicyLossMetrics> metrics;
  std::vector<std::vector<float>> dlogprob, dentropy;
};

Outcome run_cpu(hone::rl::PolicyLossPass<hone::CpuBackend>& pass, const std::vector<Input>& ins,
                const TrainLoss& loss) {
  std::vector<MicroBatch> mbs;
  for (const Input& in : ins) mbs.push_back(in.mb);
  pass.reserve(mbs);
  Outcome o;
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto g = pass.run(i, mbs[i], loss, ins[i].now.data(), ins[i].entropy.data());
    const size_t T = ins[i].now.size();
    o.dlogprob.emplace_back(g.dlogprob, g.dlogprob + T);
    o.dentropy.push_back(g.dentropy ? std::vector<float>(g.dentropy, g.dentropy + T) : std::vector<float>());
  }
  o.metrics = pass.metrics(ins.size());
  return o;
}

Outcome run_gpu(hone::rl::PolicyLossPass<hone::CudaBackend>& pass, const std::vector<Input>& ins,
                const TrainLoss& loss, const hone::cuda::GpuContext& ctx) {
  std::vector<MicroBatch> mbs;
  for (const Input& in : ins) mbs.push_back(in.mb);
  pass.reserve(mbs);
  Outcome o;
  for (size_t i = 0; i < ins.size(); ++i) {
    const int64_t T = int64_t(ins[i].now.size());
    hone::DeviceArray<float> now(T), entropy(T);
    CUDA_CHECK(cudaMemcpyAsync(now.get(), ins[i].now.data(), size_t(T) * sizeof(float), cudaMemcpyHostToDevice,
                               ctx.stream));
    CUDA_CHECK(cudaMemcpyAsync(entropy.get(), ins[i].entropy.data(), size_t(T) * sizeof(float),
                               cudaMemcpyHostToDevice, ctx.stream));
    const auto g = pass.run(i, mbs[i], loss, now.get(), entropy.get());
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // the gradients hold until the next run
    o.dlogprob.push_back(test::download_f32(g.dlogprob, T));
    o.dentropy.push_back(g.dentropy ? test::download_f32(g.dentropy, T) : std::vector<float>());
  }
  o.metrics = pass.metrics(ins.size());
  return o;
}

double rel(double got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1e-12); }

void compare(const Outcome& gpu, const Outcome& cpu) {
  BOOST_REQUIRE_EQUAL(gpu.metrics.size(), cpu.metrics.size());
  for (size_t i = 0; i < cpu.metrics.size(); ++i) {
    const hone::PolicyLossMetrics &g = gpu.metrics[i], &c = cpu.metrics[i];
    BOOST_TEST_INFO("micro-batch " << i);
    BOOST_TEST(g.valid_tokens == c.valid_tokens);
    BOOST_TEST(g.valid_seqs == c.valid_seqs);
    BOOST_TEST(g.clipped_tokens == c.clipped_tokens);
    BOOST_TEST(g.is_masked_tokens == c.is_masked_tokens);
    BOOST_TEST(g.is_masked_seqs == c.is_masked_seqs);
    const std::pair<double, double> sums[] = {{g.loss, c.loss},
                                              {g.pg_loss, c.pg_loss},
                                              {g.kl_loss, c.kl_loss},
                                              {g.entropy_loss, c.entropy_loss},
                                              {g.ratio_sum, c.ratio_sum},
                                              {g.kl_sum, c.kl_sum},
                                              {g.mult_prob_error_sum, c.mult_prob_error_sum},
                                              {g.entropy_sum, c.entropy_sum}};
    for (const auto& [got, want] : sums) BOOST_TEST(rel(got, want) <= 1e-6, got << " vs " << want);
    BOOST_REQUIRE_EQUAL(gpu.dlogprob[i].size(), cpu.dlogprob[i].size());
    BOOST_TEST(test::rel_l2_of(gpu.dlogprob[i].data(), cpu.dlogprob[i].data(), int64_t(cpu.dlogprob[i].size())) <=
               1e-6);
    BOOST_REQUIRE_EQUAL(gpu.dentropy[i].size(), cpu.dentropy[i].size());
    if (!cpu.dentropy[i].empty())
      BOOST_TEST(test::rel_l2_of(gpu.dentropy[i].data(), cpu.dentropy[i].data(),
                                 int64_t(cpu.dentropy[i].size())) <= 1e-6);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_policy_loss_pass)

BOOST_AUTO_TEST_CASE(the_two_backends_agree, *boost::unit_test::precondition(test::needs_gpu)) {
  test::ScopedGpuContext g;
  std::mt19937_64 rng(11);
  for (int variant = 0; variant < 4; ++variant) {
    BOOST_TEST_CONTEXT("variant " << variant) {
      TrainLoss loss;
      hone::PolicyLossConfig& c = loss.config;
      switch (variant) {
        case 0: break;
        case 1:  // KL and an entropy bonus, truncated importance sampling
          c.kl_coef = 0.1, c.entropy_coef = 0.01, c.importance_sampling = hone::ImportanceSampling::tis;
          c.is_threshold_high = 1.5;
          break;
        case 2:  // sequence aggregation, seq_mask, dual clip
          c.aggregation = hone::LossAggregation::sequence, c.importance_sampling = hone::ImportanceSampling::seq_mask;
          c.is_threshold_low = 0.7, c.is_threshold_high = 1.4, c.ratio_clip_c = 3;
          break;
        default:  // exactly on-policy with KL and entropy
          loss.on_policy = true, c.kl_coef = 0.05, c.entropy_coef = -0.02;
          break;
      }
      hone::rl::PolicyLossPass<hone::CudaBackend> gpu(g.ctx);
      hone::rl::PolicyLossPass<hone::CpuBackend> cpu;
      for (const std::vector<std::vector<int>>& step : {std::vector<std::vector<int>>{{5, 9}, {17}},
                                                        {{3, 40, 8}, {1, 2, 3, 4}, {300}, {64, 64}, {7}}}) {
        std::vector<Input> ins;
        int64_t valid = 0, seqs = 0;
        for (const std::vector<int>& lengths : step) {
          ins.push_back(draw(lengths, rng));
          for (uint8_t m : ins.back().mb.mask) valid += m;
          seqs += int64_t(lengths.size());
        }
        loss.denominator = double(c.aggregation == hone::LossAggregation::token ? valid : seqs);
        compare(run_gpu(gpu, ins, loss, g.ctx), run_cpu(cpu, ins, loss));
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
