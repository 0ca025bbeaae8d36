// GPU op checks for the flat elementwise ops: residual add, in-place scaling, the bf16 <-> fp32 casts (refit) and
// the fp32 accumulations of bf16 values (ring attention's traveling gradients; the CPU backend composes them from
// add_forward in place). Shapes are {N, offset[, in_place]}: an offset of 1 element misaligns every pointer and
// takes the scalar path; N not a multiple of 8 exercises the vector path's tail. Casts, scaling and the
// accumulations are IEEE-exact on both sides (tolerance 0: one fp32 add, then one round-to-nearest-even for a bf16
// result); add is compared in fp32 with a bf16 result (1e-2).
#if HONE_CUDA
#include <cstring>

#include "check_common.h"
#include "cuda/context_parallel_kernels.h"
#include "cuda/lm_head_kernels.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"
#include "tensor/dtype.h"

namespace {

using hone::cuda::bf16;

double check_add(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  const bool in_place = s.size() > 2 && s[2] != 0;
  std::vector<float> a = test::random_vector(N + off, rng), b = test::random_vector(N + off, rng);
  test::DeviceBuffer<bf16> da(N + off), db(N + off), dout(N + off);
  da.upload(a);
  db.upload(b);
  dout.poison();
  test::inputs_ready();
  bf16* out = in_place ? da.get() + off : dout.get() + off;
  hone::cuda::add_forward(out, da.get() + off, db.get() + off, N, test::check_context());
  const std::vector<float> got = in_place ? da.download() : dout.download();
  std::vector<float> want(static_cast<size_t>(N));
  hone::cpu::add_forward(want.data(), a.data() + off, b.data() + off, N);
  return test::rel_l2(got.data() + off, want.data(), N);
}

double check_scale(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> x = test::random_vector(N + off, rng);
  test::DeviceBuffer<float> dx(N + off);
  dx.upload(x);
  test::inputs_ready();
  const float f = 0.37f;
  hone::cuda::scale_inplace(dx.get() + off, f, N, test::check_context());
  const std::vector<float> got = dx.download();
  hone::cpu::scale_inplace(x.data() + off, f, N);
  // the elements before the offset must be untouched too
  return test::rel_l2(got.data(), x.data(), N + off);
}

// fp32 -> bf16 through f32_to_bf16 (refit == false) or refit_cast; the reference is the host's round-to-nearest-even.
double check_to_bf16(const test::OpShape& s, std::mt19937_64& rng, bool refit) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> x = test::random_vector(N + off, rng, 3.f);
  test::DeviceBuffer<float> dx(N + off);
  test::DeviceBuffer<bf16> dout(N + off);
  dx.upload(x);
  dout.poison();
  test::inputs_ready();
  if (refit)
    hone::cuda::refit_cast(dout.get() + off, dx.get() + off, N, test::check_context());
  else
    hone::cuda::f32_to_bf16(dout.get() + off, dx.get() + off, N, test::check_context());
  const std::vector<float> got = dout.download();
  std::vector<float> want(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) want[size_t(i)] = hone::bf16_to_f32(hone::f32_to_bf16(x[size_t(off + i)]));
  return test::rel_l2(got.data() + off, want.data(), N);
}

double check_to_f32(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> x = test::random_vector(N + off, rng, 3.f);
  test::DeviceBuffer<bf16> dx(N + off);
  test::DeviceBuffer<float> dout(N + off);
  dx.upload(x);  // x now holds the bf16 values exactly
  dout.poison();
  test::inputs_ready();
  hone::cuda::bf16_to_f32(dout.get() + off, dx.get() + off, N, test::check_context());
  const std::vector<float> got = dout.download();
  return test::rel_l2(got.data() + off, x.data() + off, N);
}

// dst (fp32) += float(src (bf16)).
double check_accumulate_into_f32(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> dst = test::random_vector(N + off, rng), src = test::random_vector(N + off, rng, 3.f);
  test::DeviceBuffer<float> ddst(N + off);
  test::DeviceBuffer<bf16> dsrc(N + off);
  ddst.upload(dst);
  dsrc.upload(src);  // src now holds the bf16 values exactly
  test::inputs_ready();
  hone::cuda::accumulate_bf16_into_f32(ddst.get() + off, dsrc.get() + off, N, test::check_context());
  const std::vector<float> got = ddst.download();
  hone::cpu::add_forward(dst.data() + off, dst.data() + off, src.data() + off, N);
  return test::rel_l2(got.data(), dst.data(), N + off);  // the elements before the offset untouched too
}

// dst (bf16) = bf16(float(dst) + src (fp32)).
double check_accumulate_into_bf16(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t N = s[0], off = s[1];
  std::vector<float> dst = test::random_vector(N + off, rng, 3.f), src = test::random_vector(N + off, rng);
  test::DeviceBuffer<bf16> ddst(N + off);
  test::DeviceBuffer<float> dsrc(N + off);
  ddst.upload(dst);  // dst now holds the bf16 values exactly
  dsrc.upload(src);
  test::inputs_ready();
  hone::cuda::accumulate_f32_into_bf16(ddst.get() + off, dsrc.get() + off, N, test::check_context());
  const std::vector<float> got = ddst.download();
  hone::cpu::add_forward(dst.data() + off, dst.data() + off, src.data() + off, N);
  for (int64_t i = off; i < N + off; ++i) dst[size_t(i)] = hone::bf16_to_f32(hone::f32_to_bf16(dst[size_t(i)]));
  return test::rel_l2(got.data(), dst.data(), N + off);
}

const std::vector<test::OpShape> kFlat = {{1, 0}, {7, 0}, {33, 0}, {1000, 0}, {1003, 0}, {4096 * 1024 + 5, 0},
                                          {1000, 1}, {4099, 1}};

const test::OpCheckRegistration reg_add{
    {"add_forward", 1e-2, {{1, 0}, {1003, 0}, {4096 * 1024, 0}, {4096 * 1024 + 3, 0}, {999, 1}, {1003, 0, 1},
                           {1003, 1, 1}}, &check_add}};
const test::OpCheckRegistration reg_scale{{"scale_inplace", 0.0, kFlat, &check_scale}};
const test::OpCheckRegistration reg_f2b{
    {"f32_to_bf16", 0.0, kFlat, [](const test::OpShape& s, std::mt19937_64& r) { return check_to_bf16(s, r, false); }}};
const test::OpCheckRegistration reg_refit{
    {"refit_cast", 0.0, kFlat, [](const test::OpShape& s, std::mt19937_64& r) { return check_to_bf16(s, r, true); }}};
const test::OpCheckRegistration reg_b2f{{"bf16_to_f32", 0.0, kFlat, &check_to_f32}};
const test::OpCheckRegistration reg_acc_f32{{"accumulate_bf16_into_f32", 0.0, kFlat, &check_accumulate_into_f32}};
const test::OpCheckRegistration reg_acc_bf16{{"accumulate_f32_into_bf16", 0.0, kFlat, &check_accumulate_into_bf16}};

}  // namespace
#endif  // HONE_CUDA
