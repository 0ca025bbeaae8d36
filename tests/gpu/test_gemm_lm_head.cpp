// Edge cases of the GPU LM head and linear layer that the data-driven op checks do not reach: every target masked
// (outputs exactly 0, gradients exactly unchanged) and empty inputs (nothing happens).
#include <boost/test/unit_test.hpp>

#include <random>
#include <vector>

#include "common/gpu.h"
#include "cuda/ops_cuda.h"
#include "device_buffer.h"

namespace {

using hone::cuda::bf16;
using test::DeviceBuffer;

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);  // lives for the whole test program
  return ctx;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_lm_head_edges)

BOOST_AUTO_TEST_CASE(rows_without_targets_give_zero_and_no_gradient, *boost::unit_test::precondition(test::needs_gpu)) {
  const int T = 9, C = 40, V = 300, chunk_v = 128;
  std::mt19937_64 rng(11);
  auto h = test::random_vector(int64_t(T) * C, rng), w = test::random_vector(int64_t(V) * C, rng, 0.2f);
  auto dh0 = test::random_vector(int64_t(T) * C, rng), dw0 = test::random_vector(int64_t(V) * C, rng);
  std::vector<float> ones(static_cast<size_t>(T), 1.f);
  DeviceBuffer<bf16> d_h(int64_t(T) * C), d_w(int64_t(V) * C), d_dh(int64_t(T) * C);
  DeviceBuffer<float> d_lp(T), d_ent(T), d_lse(T), d_dw(int64_t(V) * C), d_g(T);
  DeviceBuffer<int32_t> d_targets(T);
  d_h.upload(h);
  d_w.upload(w);
  d_dh.upload(dh0);
  d_dw.upload(dw0);
  d_g.upload(ones);
  d_targets.upload_raw(std::vector<int32_t>(static_cast<size_t>(T), -1));
  d_lp.poison();
  d_ent.poison();
  d_lse.poison();
  CUDA_CHECK(cudaDeviceSynchronize());
  hone::cuda::lm_head_logprob_forward(d_lp.get(), d_ent.get(), d_lse.get(), d_h.get(), d_w.get(), d_targets.get(), T,
                                      C, V, 0.7f, chunk_v, gpu());
  for (const auto& out : {d_lp.download(), d_ent.download(), d_lse.download()})
    for (float x : out) BOOST_TEST(x == 0.f);
  // Backward with nonzero upstream gradients: masked rows must contribute nothing.
  hone::cuda::lm_head_logprob_backward(d_dh.get(), d_dw.get(), d_g.get(), d_g.get(), d_h.get(), d_w.get(),
                                       d_targets.get(), d_lse.get(), d_ent.get(), T, C, V, 0.7f, chunk_v, gpu());
  BOOST_TEST(d_dh.download() == dh0);  // dh0 holds the bf16-rounded values the device started from
  BOOST_TEST(d_dw.download() == dw0);
}

BOOST_AUTO_TEST_CASE(empty_inputs_do_nothing, *boost::unit_test::precondition(test::needs_gpu)) {
  DeviceBuffer<bf16> b(16);
  DeviceBuffer<float> f(16);
  DeviceBuffer<int32_t> targets(16);
  f.zero();
  CUDA_CHECK(cudaDeviceSynchronize());
  BOOST_CHECK_NO_THROW(hone::cuda::lm_head_logprob_forward(f.get(), f.get(), f.get(), b.get(), b.get(), targets.get(),
                                                           0, 4, 4, 1.f, 2, gpu()));
  BOOST_CHECK_NO_THROW(hone::cuda::lm_head_logprob_backward(b.get(), f.get(), f.get(), nullptr, b.get(), b.get(),
                                                            targets.get(), f.get(), nullptr, 0, 4, 4, 1.f, 2, gpu()));
  BOOST_CHECK_NO_THROW(hone::cuda::lm_head_logits(f.get(), b.get(), b.get(), 0, 4, 4, gpu()));
  BOOST_CHECK_NO_THROW(hone::cuda::linear_forward(b.get(), b.get(), b.get(), nullptr, 0, 4, 4, gpu()));
  BOOST_CHECK_NO_THROW(hone::cuda::linear_backward(b.get(), f.get(), f.get(), b.get(), b.get(), b.get(), 0, 4, 4, false, gpu()));
  for (float x : f.download()) BOOST_TEST(x == 0.f);
  BOOST_CHECK_THROW(hone::cuda::lm_head_logprob_forward(f.get(), nullptr, f.get(), b.get(), b.get(), targets.get(), 1,
                                                        4, 4, 0.f, 2, gpu()),
                    hone::Error);  // temperature 0
}

BOOST_AUTO_TEST_SUITE_END()
