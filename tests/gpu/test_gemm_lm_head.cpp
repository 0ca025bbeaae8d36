// Edge cases of the GPU LM head and linear layer that the data-driven op checks do not reach: every target masked
// (outputs exactly 0, gradients exactly unchanged) and empty inputs (nothing happens). Also the LM head's two
// streams as a caller sees them: the outputs ordered on the context's stream alone (the op joins its side stream
// back), and the ops captured into a CUDA graph (the side stream forked from the capturing stream) giving the
// results of eager calls.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "common/gpu.h"
#include "cuda/lm_head_kernels.h"
#include "cuda/ops_cuda.h"
#include "device_buffer.h"

namespace {

using hone::cuda::bf16;
using test::DeviceBuffer;

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);  // lives for the whole test program
  return ctx;
}

// An LM head problem run with a small work budget: T = 300 rows in 5 blocks of up to 62 (forward) and 9 of up to 37
// (backward), V = 1000 in 9 chunks of 120 (the last of 40). About a quarter of the targets are -1.
struct SmallBudgetProblem {
  static constexpr int T = 300, C = 64, V = 1000, chunk_v = 120;
  static constexpr size_t kBudget = size_t(64) << 10;
  static constexpr float temperature = 0.7f;
  std::vector<float> h, w, dlp, dent, dh0, dw0;
  DeviceBuffer<bf16> d_h{int64_t(T) * C}, d_w{int64_t(V) * C}, d_dh{int64_t(T) * C};
  DeviceBuffer<float> d_lp{T}, d_ent{T}, d_lse{T}, d_dw{int64_t(V) * C}, d_dlp{T}, d_dent{T};
  DeviceBuffer<int32_t> d_targets{T};

  explicit SmallBudgetProblem(uint64_t seed) {
    std::mt19937_64 rng(seed);
    h = test::random_vector(int64_t(T) * C, rng);
    w = test::random_vector(int64_t(V) * C, rng, 0.25f);
    dlp = test::random_vector(T, rng);
    dent = test::random_vector(T, rng);
    dh0 = test::random_vector(int64_t(T) * C, rng, 0.01f);
    dw0 = test::random_vector(int64_t(V) * C, rng, 0.01f);
    std::uniform_int_distribution<int> tok(0, V - 1), coin(0, 3);
    std::vector<int32_t> targets(static_cast<size_t>(T));
    for (auto& t : targets) t = coin(rng) == 0 ? -1 : tok(rng);
    d_h.upload(h);
    d_w.upload(w);
    d_dlp.upload(dlp);
    d_dent.upload(dent);
    d_targets.upload_raw(targets);
    reset();
  }
  // Outputs poisoned, accumulated gradients back to their starting values.
  void reset() {
    d_lp.poison();
    d_ent.poison();
    d_lse.poison();
    d_dh.upload(dh0);
    d_dw.upload(dw0);
  }
  void forward(const hone::cuda::GpuContext& ctx) {
    hone::cuda::lm_head_logprob_forward(d_lp.get(), d_ent.get(), d_lse.get(), d_h.get(), d_w.get(), d_targets.get(),
                                        T, C, V, temperature, chunk_v, ctx);
  }
  void backward(const hone::cuda::GpuContext& ctx) {
    hone::cuda::lm_head_logprob_backward(d_dh.get(), d_dw.get(), d_dlp.get(), d_dent.get(), d_h.get(), d_w.get(),
                                         d_targets.get(), d_lse.get(), d_ent.get(), T, C, V, temperature, chunk_v,
                                         ctx);
  }
};

// got == want up to a relative 1e-5 per value (the same kernels and GEMM plans; room for a GEMM algorithm whose
// reduction order is not fixed), and nothing is NaN.
void check_close(const std::vector<float>& got, const std::vector<float>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= 1e-5f * (1.f + std::fabs(want[i])))) ++bad;
  BOOST_TEST(bad == 0u);
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

// The forward's outputs are written by its side stream; a copy queued on the context's stream right after the op and
// awaited with that stream alone must see them all (poisoned outputs would show as NaN).
BOOST_AUTO_TEST_CASE(outputs_are_ordered_on_the_context_stream, *boost::unit_test::precondition(test::needs_gpu)) {
  hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  hone::cuda::set_lm_head_work_budget(ctx, SmallBudgetProblem::kBudget);
  SmallBudgetProblem p(21);
  const int T = SmallBudgetProblem::T;
  DeviceBuffer<float> copy(3 * int64_t(T));
  copy.zero();
  p.forward(ctx);
  for (int i = 0; i < 3; ++i) {
    const float* src = (i == 0 ? p.d_lp : i == 1 ? p.d_ent : p.d_lse).get();
    CUDA_CHECK(cudaMemcpyAsync(copy.get() + int64_t(i) * T, src, size_t(T) * sizeof(float),
                               cudaMemcpyDeviceToDevice, ctx.stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::vector<float> want = p.d_lp.download(), ent = p.d_ent.download(), lse = p.d_lse.download();
  want.insert(want.end(), ent.begin(), ent.end());
  want.insert(want.end(), lse.begin(), lse.end());
  for (float x : want) BOOST_REQUIRE(std::isfinite(x));
  BOOST_TEST(copy.download() == want);
  hone::cuda::destroy_gpu_context(ctx);
}

// Forward and backward captured into one CUDA graph (after eager calls that made the GEMM plans, the work buffer
// and the side stream) and replayed: the results of the eager calls.
BOOST_AUTO_TEST_CASE(ops_captured_in_a_graph_replay_the_eager_results,
                     *boost::unit_test::precondition(test::needs_gpu)) {
  hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);
  hone::cuda::set_lm_head_work_budget(ctx, SmallBudgetProblem::kBudget);
  SmallBudgetProblem p(22);
  p.forward(ctx);
  p.backward(ctx);
  const std::vector<float> lp = p.d_lp.download(), ent = p.d_ent.download(), lse = p.d_lse.download(),
                           dh = p.d_dh.download(), dw = p.d_dw.download();
  p.reset();
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  p.forward(ctx);
  p.backward(ctx);
  CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  check_close(p.d_lp.download(), lp);
  check_close(p.d_ent.download(), ent);
  check_close(p.d_lse.download(), lse);
  check_close(p.d_dh.download(), dh);
  check_close(p.d_dw.download(), dw);
  hone::cuda::destroy_gpu_context(ctx);
}

BOOST_AUTO_TEST_SUITE_END()
