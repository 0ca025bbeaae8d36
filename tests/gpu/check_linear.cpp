// GPU op checks of the linear layer (cuda/linear.cpp) against hone::cpu::linear_forward/backward.
// Shapes {T, IC, OC, with_bias}. Tolerances (relative L2):
//   * bf16 outputs (out, dx): 1e-2; one bf16 rounding of the result is ~2e-3.
//   * fp32 gradients (dw, dbias) from bf16 inputs: 1e-4. Products of bf16 values are exact in fp32, so GPU and CPU
//     differ only in fp32 summation order (~1e-6); 1e-4 leaves room for the accumulation order cuBLASLt picks, and
//     any indexing or transpose error is O(1).
// Accumulated gradients are pre-filled with random values of the size of the increment, and the totals compared; a
// written dx (accumulate_dx false) is poisoned first and compared with the increment.
#include <algorithm>
#include <cmath>

#include "cuda/ops_cuda.h"
#include "device_buffer.h"
#include "op_checks.h"

namespace {

using hone::cuda::bf16;
using test::DeviceBuffer;

const hone::cuda::GpuContext& gpu() {
  static hone::cuda::GpuContext ctx = hone::cuda::create_gpu_context(0);  // lives for the whole test program
  return ctx;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// Random values of the increment's size, so that the comparison of totals still sees the increment.
std::vector<float> prefill_like(const std::vector<float>& increment, std::mt19937_64& rng) {
  const double r = rms(increment);
  return test::random_vector(int64_t(increment.size()), rng, float(r > 0 ? r : 1.0));
}

std::vector<float> plus(std::vector<float> a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

double err(const std::vector<float>& got, const std::vector<float>& want) {
  return test::rel_l2(got.data(), want.data(), int64_t(want.size()));
}

double check_linear_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), IC = int(s[1]), OC = int(s[2]);
  const bool with_bias = s[3] != 0;
  auto x = test::random_vector(int64_t(T) * IC, rng);
  auto w = test::random_vector(int64_t(OC) * IC, rng, 1.f / std::sqrt(float(IC)));
  auto b = test::random_vector(OC, rng);
  DeviceBuffer<bf16> d_x(int64_t(T) * IC), d_w(int64_t(OC) * IC), d_b(OC), d_out(int64_t(T) * OC);
  d_x.upload(x);
  d_w.upload(w);
  d_b.upload(b);
  d_out.poison();
  CUDA_CHECK(cudaDeviceSynchronize());  // uploads and memsets ran on the legacy stream; the op uses its own
  hone::cuda::linear_forward(d_out.get(), d_x.get(), d_w.get(), with_bias ? d_b.get() : nullptr, T, IC, OC, gpu());
  const auto got = d_out.download();
  std::vector<float> want(size_t(T) * OC);
  hone::cpu::linear_forward(want.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, T, IC, OC);
  return err(got, want);
}

struct BackwardResult {
  double dx, dw, dbias;
};

// Runs both backward passes with pre-filled accumulators; with_dx = false passes a null dx to the GPU, with_dw =
// false a null dw and dbias (the input gradient alone, as the tensor-parallel layers ask for a few rows of it);
// accumulate_dx = false has the GPU write dx over NaN.
BackwardResult run_linear_backward(const test::OpShape& s, bool with_dx, std::mt19937_64& rng, bool with_dw = true,
                                   bool accumulate_dx = true) {
  const int T = int(s[0]), IC = int(s[1]), OC = int(s[2]);
  const bool with_bias = s[3] != 0;
  auto x = test::random_vector(int64_t(T) * IC, rng);
  auto w = test::random_vector(int64_t(OC) * IC, rng, 1.f / std::sqrt(float(IC)));
  auto dout = test::random_vector(int64_t(T) * OC, rng);
  DeviceBuffer<bf16> d_x(int64_t(T) * IC), d_w(int64_t(OC) * IC), d_dout(int64_t(T) * OC), d_dx(int64_t(T) * IC);
  DeviceBuffer<float> d_dw(int64_t(OC) * IC), d_db(OC);
  d_x.upload(x);
  d_w.upload(w);
  d_dout.upload(dout);

  // The CPU increments (from zero) give the size of the pre-filled values.
  std::vector<float> inc_dx(size_t(T) * IC, 0.f), inc_dw(size_t(OC) * IC, 0.f), inc_db(size_t(OC), 0.f);
  hone::cpu::linear_backward(inc_dx.data(), inc_dw.data(), inc_db.data(), dout.data(), x.data(), w.data(), T, IC, OC,
                             false);
  auto dx0 = prefill_like(inc_dx, rng), dw0 = prefill_like(inc_dw, rng), db0 = prefill_like(inc_db, rng);
  d_dx.upload(dx0);  // dx0 now holds the bf16-rounded values the GPU starts from
  d_dw.upload(dw0);
  d_db.upload(db0);
  if (with_dx && !accumulate_dx) d_dx.poison();  // written: the old values must not be read
  CUDA_CHECK(cudaDeviceSynchronize());
  hone::cuda::linear_backward(with_dx ? d_dx.get() : nullptr, with_dw ? d_dw.get() : nullptr,
                              with_bias && with_dw ? d_db.get() : nullptr, d_dout.get(), d_x.get(), d_w.get(), T, IC,
                              OC, accumulate_dx, gpu());
  BackwardResult r{};
  r.dx = err(d_dx.download(), !with_dx ? dx0 : accumulate_dx ? plus(dx0, inc_dx) : inc_dx);  // null: untouched
  r.dw = err(d_dw.download(), with_dw ? plus(dw0, inc_dw) : dw0);  // and a null dw
  r.dbias = err(d_db.download(), with_bias && with_dw ? plus(db0, inc_db) : db0);
  return r;
}

double check_linear_backward_dx(const test::OpShape& s, std::mt19937_64& rng) {
  return run_linear_backward(s, /*with_dx=*/true, rng).dx;
}

double check_linear_backward_params(const test::OpShape& s, std::mt19937_64& rng) {
  const BackwardResult r = run_linear_backward(s, /*with_dx=*/false, rng);
  return std::max({r.dw, r.dbias, r.dx});
}

// dx written (beta 0) over NaN, with the weight gradients accumulated as ever.
double check_linear_backward_dx_written(const test::OpShape& s, std::mt19937_64& rng) {
  const BackwardResult r = run_linear_backward(s, /*with_dx=*/true, rng, /*with_dw=*/true, /*accumulate_dx=*/false);
  return std::max({r.dx, r.dw, r.dbias});
}

// The input gradient alone: dx as with the weights, dw and dbias untouched.
double check_linear_backward_dx_only(const test::OpShape& s, std::mt19937_64& rng) {
  const BackwardResult r = run_linear_backward(s, /*with_dx=*/true, rng, /*with_dw=*/false);
  return std::max({r.dx, r.dw, r.dbias});
}

// linear_forward_pair, shapes {T, IC, OC, placement}: 0 both weights in one buffer back to back and the outputs too
// (one batched GEMM); 1 the same with a gap of 8 elements after each (the batched GEMM at another stride and 16-byte
// alignment); 2 the second output before the first (two GEMMs). The gaps are poisoned and must stay NaN.
double check_linear_forward_pair(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), IC = int(s[1]), OC = int(s[2]), placement = int(s[3]);
  const int64_t wn = int64_t(OC) * IC, on = int64_t(T) * OC, gap = placement == 1 ? 8 : 0;
  auto x = test::random_vector(int64_t(T) * IC, rng);
  auto w = test::random_vector(2 * wn + gap, rng, 1.f / std::sqrt(float(IC)));
  DeviceBuffer<bf16> d_x(int64_t(T) * IC), d_w(2 * wn + gap), d_out(2 * on + 2 * gap);
  d_x.upload(x);
  d_w.upload(w);
  d_out.poison();
  const int64_t at0 = placement == 2 ? on : 0, at1 = placement == 2 ? 0 : on + gap;
  hone::cuda::linear_forward_pair(d_out.get() + at0, d_out.get() + at1, d_x.get(), d_w.get(), d_w.get() + wn + gap, T,
                                  IC, OC, gpu());
  const auto got = d_out.download();
  std::vector<float> want0(static_cast<size_t>(on)), want1(static_cast<size_t>(on));
  hone::cpu::linear_forward_pair(want0.data(), want1.data(), x.data(), w.data(), w.data() + wn + gap, T, IC, OC);
  const double e0 = test::rel_l2(got.data() + at0, want0.data(), on);
  const double e1 = test::rel_l2(got.data() + at1, want1.data(), on);
  for (int64_t i = 2 * on + gap; i < int64_t(got.size()); ++i)  // past both outputs: untouched
    if (!std::isnan(got[size_t(i)])) return 1.0;
  if (gap > 0 && !std::isnan(got[size_t(on)])) return 1.0;  // the gap between the outputs
  return std::max(e0, e1);
}

const std::vector<test::OpShape> kPairShapes = {
    {1, 33, 64, 0},  {7, 64, 40, 1},    {7, 33, 33, 2},     {512, 1024, 3072, 0},
    {512, 1024, 1024, 1}, {300, 2048, 512, 2}, {1000, 1024, 3072, 0},
};

const std::vector<test::OpShape> kShapes = {
    {1, 33, 64, 1}, {7, 64, 33, 0}, {7, 33, 33, 1}, {256, 1024, 3072, 1}, {1000, 3072, 1024, 0}, {1000, 64, 1024, 1},
};

const test::OpCheckRegistration reg_fwd{{"linear_forward", 1e-2, kShapes, &check_linear_forward}};
const test::OpCheckRegistration reg_fwd_pair{
    {"linear_forward_pair", 1e-2, kPairShapes, &check_linear_forward_pair}};
const test::OpCheckRegistration reg_bwd_dx{{"linear_backward_dx", 1e-2, kShapes, &check_linear_backward_dx}};
const test::OpCheckRegistration reg_bwd_dx_written{
    {"linear_backward_dx_written", 1e-2, kShapes, &check_linear_backward_dx_written}};
const test::OpCheckRegistration reg_bwd_dx_only{
    {"linear_backward_dx_only", 1e-2, kShapes, &check_linear_backward_dx_only}};
const test::OpCheckRegistration reg_bwd_params{
    {"linear_backward_dw_dbias", 1e-4, kShapes, &check_linear_backward_params}};

}  // namespace
