// GPU op checks for SwiGLU forward and backward (bf16, tolerance 1e-2). Shapes {N, offset}: offset 1 misaligns the
// pointers (scalar path); N % 8 != 0 exercises the vector tail. Backward accumulates into random dgate/dup, or writes
// over NaN.
#if HONE_CUDA
#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

double check_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> g = test::random_vector(N + off, rng, 2.f), u = test::random_vector(N + off, rng);
  test::DeviceBuffer<bf16> dg(N + off), du(N + off), dout(N + off);
  dg.upload(g);
  du.upload(u);
  dout.poison();
  test::inputs_ready();
  hone::cuda::swiglu_forward(dout.get() + off, dg.get() + off, du.get() + off, N, test::check_context());
  const std::vector<float> got = dout.download();
  std::vector<float> want(static_cast<size_t>(N));
  hone::cpu::swiglu_forward(want.data(), g.data() + off, u.data() + off, N);
  return test::rel_l2(got.data() + off, want.data(), N);
}

double check_backward(const test::OpShape& s, std::mt19937_64& rng, bool accumulate) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> g = test::random_vector(N + off, rng, 2.f), u = test::random_vector(N + off, rng);
  std::vector<float> d = test::random_vector(N + off, rng);
  std::vector<float> dg0 = test::random_vector(N + off, rng, 0.5f), du0 = test::random_vector(N + off, rng, 0.5f);
  test::DeviceBuffer<bf16> bg(N + off), bu(N + off), bd(N + off), bdg(N + off), bdu(N + off);
  bg.upload(g);
  bu.upload(u);
  bd.upload(d);
  bdg.upload(dg0);
  bdu.upload(du0);
  if (!accumulate) {
    bdg.poison();
    bdu.poison();
  }
  test::inputs_ready();
  hone::cuda::swiglu_backward(bdg.get() + off, bdu.get() + off, bd.get() + off, bg.get() + off, bu.get() + off, N,
                              accumulate, test::check_context());
  const std::vector<float> got_g = bdg.download(), got_u = bdu.download();
  hone::cpu::swiglu_backward(dg0.data() + off, du0.data() + off, d.data() + off, g.data() + off, u.data() + off, N,
                             accumulate);
  return test::worst(test::rel_l2(got_g.data() + off, dg0.data() + off, N),
                     test::rel_l2(got_u.data() + off, du0.data() + off, N));
}

const std::vector<test::OpShape> kShapes = {{1, 0}, {33, 0}, {1000, 0}, {4096 * 3072, 0}, {4096 * 33 + 5, 0},
                                            {1003, 1}};

const test::OpCheckRegistration reg_fwd{{"swiglu_forward", 1e-2, kShapes, &check_forward}};
const test::OpCheckRegistration reg_bwd{
    {"swiglu_backward", 1e-2, kShapes, [](auto& s, auto& r) { return check_backward(s, r, true); }}};
const test::OpCheckRegistration reg_bwd_written{
    {"swiglu_backward_written", 1e-2, kShapes, [](auto& s, auto& r) { return check_backward(s, r, false); }}};

}  // namespace
#endif  // HONE_CUDA
