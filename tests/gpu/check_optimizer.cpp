// GPU op checks for the optimizer ops on flat fp32 buffers: AdamW (param, m and v; fp32 tolerance 1e-5) and the
// sum of squares (double on both sides; tolerance 1e-9, above the (N-1) u bound of two double sums of N <= 4M
// non-negative terms). Shapes {N, offset[, step]}: offset 1 misaligns the buffers (scalar path); N % 4 != 0 leaves a tail.
#if HONE_CUDA
#include <cmath>

#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

double check_adamw(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  const int step = int(s[2]);
  std::vector<float> p = test::random_vector(N + off, rng), g = test::random_vector(N + off, rng, 0.1f);
  std::vector<float> m = test::random_vector(N + off, rng, 0.01f), v = test::random_vector(N + off, rng, 0.01f);
  for (auto& x : v) x = x * x;
  test::DeviceBuffer<float> bp(N + off), bg(N + off), bm(N + off), bv(N + off);
  bp.upload(p);
  bg.upload(g);
  bm.upload(m);
  bv.upload(v);
  test::inputs_ready();
  const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.1f;
  hone::cuda::adamw_update(bp.get() + off, bg.get() + off, bm.get() + off, bv.get() + off, N, lr, b1, b2, eps, wd,
                           step, test::check_context());
  const std::vector<float> gp = bp.download(), gm = bm.download(), gv = bv.download();
  hone::cpu::adamw_update(p.data() + off, g.data() + off, m.data() + off, v.data() + off, N, lr, b1, b2, eps, wd, step);
  double err = test::rel_l2(gp.data(), p.data(), N + off);
  err = test::worst(err, test::rel_l2(gm.data(), m.data(), N + off));
  err = test::worst(err, test::rel_l2(gv.data(), v.data(), N + off));
  // A wrong update shows in param: lr = 3e-4 against |p| ~ 1 is 30x the tolerance (weight decay alone is 3x).
  return err;
}

double check_sum_squares(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> x = test::random_vector(N + off, rng);
  test::DeviceBuffer<float> bx(N + off);
  bx.upload(x);
  test::inputs_ready();
  const double got = hone::cuda::sum_squares(bx.get() + off, N, test::check_context());
  const double want = hone::cpu::sum_squares(x.data() + off, N);
  if (!std::isfinite(got)) return INFINITY;
  return std::fabs(got - want) / want;
}

const test::OpCheckRegistration reg_adamw{
    {"adamw_update", 1e-5, {{1, 0, 1}, {1003, 0, 1}, {4096 * 1024 + 3, 0, 7}, {4099, 1, 1000}, {33, 1, 2}},
     &check_adamw}};
const test::OpCheckRegistration reg_ss{
    {"sum_squares", 1e-9, {{1, 0}, {7, 0}, {1003, 0}, {4096 * 1024 + 3, 0}, {4099, 1}, {4000000, 0}},
     &check_sum_squares}};

}  // namespace
#endif  // HONE_CUDA
