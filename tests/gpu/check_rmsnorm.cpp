// GPU op checks for RMSNorm: forward (out bf16 1e-2; rstd fp32 1e-5), the fused residual add + norm, and backward
// (dx bf16 1e-2; dw fp32 1e-5, both accumulated into random values). Shapes {rows, C}: C = 33 and 1001 take the
// scalar path (C % 8 != 0), C = 64/128 are the per-head q/k norm, rows = 1 and 7 leave most warps of a block idle,
// and the dw shapes cover both the single-slice and the two-kernel (partial sums) reductions. The forward takes a
// block per row below the rows that fill the SMs a warp each (7 x 2048, 64 x 4096, 3 x 4104, 48 x 2048 in place).
// The backward of 16-byte rows up to 2,048 wide runs in one pass (64 to 2,048, with the training shapes 16384 x 2048
// and 40000 x 1024 and a row of 6 chunks, 1536); 4096 and 4104 take the separate dw pass.
#if HONE_CUDA
#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "tensor/dtype.h"

namespace {

using hone::cuda::bf16;

constexpr float kEps = 1e-6f;

struct Forward {
  double out_err, rstd_err;
};

Forward run_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int rows = int(s[0]), C = int(s[1]);
  const int64_t n = int64_t(rows) * C;
  std::vector<float> x = test::random_vector(n, rng, 2.f), w = test::random_vector(C, rng, 0.5f);
  for (auto& v : w) v += 1.f;
  test::DeviceBuffer<bf16> dx(n), dw(C), dout(n);
  test::DeviceBuffer<float> drstd(rows);
  dx.upload(x);
  dw.upload(w);
  dout.poison();
  drstd.poison();
  test::inputs_ready();
  hone::cuda::rmsnorm_forward(dout.get(), drstd.get(), dx.get(), dw.get(), rows, C, kEps, test::check_context());
  const std::vector<float> got = dout.download(), got_rstd = drstd.download();
  std::vector<float> want(static_cast<size_t>(n)), want_rstd(static_cast<size_t>(rows));
  hone::cpu::rmsnorm_forward(want.data(), want_rstd.data(), x.data(), w.data(), rows, C, kEps);
  return {test::rel_l2(got.data(), want.data(), n), test::rel_l2(got_rstd.data(), want_rstd.data(), rows)};
}

// sum = a + b rounded to bf16 (what the GPU stores), then the CPU norm of that sum. Shape {rows, C, in_place}:
// in_place writes sum over a.
double check_add_rmsnorm(const test::OpShape& s, std::mt19937_64& rng) {
  const int rows = int(s[0]), C = int(s[1]);
  const bool in_place = s.size() > 2 && s[2] != 0;
  const int64_t n = int64_t(rows) * C;
  std::vector<float> a = test::random_vector(n, rng), b = test::random_vector(n, rng), w = test::random_vector(C, rng);
  test::DeviceBuffer<bf16> da(n), db(n), dw(C), dsum(n), dout(n);
  test::DeviceBuffer<float> drstd(rows);
  da.upload(a);
  db.upload(b);
  dw.upload(w);
  dsum.poison();
  dout.poison();
  drstd.poison();
  test::inputs_ready();
  bf16* sum = in_place ? da.get() : dsum.get();
  hone::cuda::add_rmsnorm_forward(sum, dout.get(), drstd.get(), da.get(), db.get(), dw.get(), rows, C, kEps,
                                  test::check_context());
  const std::vector<float> got_sum = in_place ? da.download() : dsum.download();
  const std::vector<float> got = dout.download(), got_rstd = drstd.download();
  std::vector<float> sum_ref(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  std::vector<float> want_rstd(static_cast<size_t>(rows));
  hone::cpu::add_forward(sum_ref.data(), a.data(), b.data(), n);
  double err = test::rel_l2(got_sum.data(), sum_ref.data(), n);
  for (auto& v : sum_ref) v = hone::bf16_to_f32(hone::f32_to_bf16(v));
  hone::cpu::rmsnorm_forward(want.data(), want_rstd.data(), sum_ref.data(), w.data(), rows, C, kEps);
  err = test::worst(err, test::rel_l2(got.data(), want.data(), n));
  return test::worst(err, test::rel_l2(got_rstd.data(), want_rstd.data(), rows));
}

struct Backward {
  double dx_err, dw_err;
};

// accumulate: dx pre-filled with random values and added to; else poisoned and written.
Backward run_backward(const test::OpShape& s, std::mt19937_64& rng, bool accumulate = true) {
  const int rows = int(s[0]), C = int(s[1]);
  const int64_t n = int64_t(rows) * C;
  std::vector<float> x = test::random_vector(n, rng, 2.f), w = test::random_vector(C, rng);
  std::vector<float> g = test::random_vector(n, rng), dx = test::random_vector(n, rng, 0.5f);
  std::vector<float> dw = test::random_vector(C, rng);
  std::vector<float> rstd(static_cast<size_t>(rows)), tmp(static_cast<size_t>(n));
  test::DeviceBuffer<bf16> bx(n), bw(C), bg(n), bdx(n);
  test::DeviceBuffer<float> bdw(C), brstd(rows);
  bx.upload(x);
  bw.upload(w);
  bg.upload(g);
  bdx.upload(dx);
  if (!accumulate) bdx.poison();
  bdw.upload(dw);
  hone::cpu::rmsnorm_forward(tmp.data(), rstd.data(), x.data(), w.data(), rows, C, kEps);
  brstd.upload(rstd);  // both sides use the CPU's rstd
  test::inputs_ready();
  hone::cuda::rmsnorm_backward(bdx.get(), bdw.get(), bg.get(), bx.get(), bw.get(), brstd.get(), rows, C,
                               accumulate, test::check_context());
  const std::vector<float> got_dx = bdx.download(), got_dw = bdw.download();
  hone::cpu::rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), rows, C, accumulate);
  return {test::rel_l2(got_dx.data(), dx.data(), n), test::rel_l2(got_dw.data(), dw.data(), C)};
}

const std::vector<test::OpShape> kShapes = {{1, 33},    {7, 1000},  {7, 1001}, {4096, 1024}, {7, 2048},  {4096, 128},
                                            {33, 64},   {64, 4096}, {3, 4104},    {4096, 33}, {16384, 128},
                                            {16384, 2048}, {40000, 1024}, {9, 1536}};

const test::OpCheckRegistration reg_fwd{
    {"rmsnorm_forward", 1e-2, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_forward(s, r).out_err; }}};
const test::OpCheckRegistration reg_rstd{
    {"rmsnorm_forward_rstd", 1e-5, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_forward(s, r).rstd_err; }}};
const test::OpCheckRegistration reg_add{
    {"add_rmsnorm_forward", 1e-2,
     {{1, 33}, {7, 1001}, {4096, 1024}, {64, 4096}, {4096, 1024, 1}, {5, 33, 1}, {48, 2048, 1}, {3, 4104}},
     &check_add_rmsnorm}};
const test::OpCheckRegistration reg_dx{
    {"rmsnorm_backward_dx", 1e-2, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r).dx_err; }}};
const test::OpCheckRegistration reg_dx_written{
    {"rmsnorm_backward_dx_written", 1e-2, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r, false).dx_err; }}};
const test::OpCheckRegistration reg_dw{
    {"rmsnorm_backward_dw", 1e-5, kShapes,
     [](const test::OpShape& s, std::mt19937_64& r) { return run_backward(s, r).dw_err; }}};

}  // namespace
#endif  // HONE_CUDA
