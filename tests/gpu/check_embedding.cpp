// GPU op checks for the token embedding. Forward is a bf16 row copy (exact: tolerance 0); backward adds bf16 dout
// rows into a random fp32 dwte with atomics, so only the order of fp32 additions differs from the serial CPU sum
// (tolerance 1e-5). Shapes {T, C, V}: small V forces many repeated ids; C = 33 and 1027 take the scalar path.
// The vocabulary-parallel slices (embedding_slice_forward/backward, same tolerances): shapes {T, C, Vg, tp, rank},
// the slice of rank `rank` when Vg ids are padded to a multiple of tp and split in tp: [rank * n, (rank + 1) * n)
// with n = ceil(Vg / tp); ids are global, so most fall outside a slice (zero rows, no gradient).
#if HONE_CUDA
#include "check_common.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

using hone::cuda::bf16;

double check_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), C = int(s[1]), V = int(s[2]);
  std::vector<float> wte = test::random_vector(int64_t(V) * C, rng);
  const std::vector<int32_t> ids = test::random_ids(T, 0, V, rng);
  test::DeviceBuffer<bf16> dwte(int64_t(V) * C), dout(int64_t(T) * C);
  test::DeviceBuffer<int32_t> dids(T);
  dwte.upload(wte);
  dids.upload_raw(ids);
  dout.poison();
  test::inputs_ready();
  hone::cuda::embedding_forward(dout.get(), dids.get(), dwte.get(), T, C, test::check_context());
  const std::vector<float> got = dout.download();
  std::vector<float> want(size_t(T) * size_t(C));
  hone::cpu::embedding_forward(want.data(), ids.data(), wte.data(), T, C);
  return test::rel_l2(got.data(), want.data(), int64_t(T) * C);
}

double check_backward(const test::OpShape& s, std::mt19937_64& rng) {
  const int T = int(s[0]), C = int(s[1]), V = int(s[2]);
  std::vector<float> dwte = test::random_vector(int64_t(V) * C, rng);
  std::vector<float> dout = test::random_vector(int64_t(T) * C, rng);
  const std::vector<int32_t> ids = test::random_ids(T, 0, V, rng);
  test::DeviceBuffer<float> ddwte(int64_t(V) * C);
  test::DeviceBuffer<bf16> ddout(int64_t(T) * C);
  test::DeviceBuffer<int32_t> dids(T);
  ddwte.upload(dwte);
  ddout.upload(dout);
  dids.upload_raw(ids);
  test::inputs_ready();
  hone::cuda::embedding_backward(ddwte.get(), ddout.get(), dids.get(), T, C, test::check_context());
  const std::vector<float> got = ddwte.download();
  hone::cpu::embedding_backward(dwte.data(), dout.data(), ids.data(), T, C);
  return test::rel_l2(got.data(), dwte.data(), int64_t(V) * C);
}

// A slice {T, C, Vg, tp, rank}: wte rows [begin, begin + n); random global ids in [0, Vg), the first one (when the
// slice holds any id) the slice's first.
struct SliceIds {
  int T, C, Vg, n, begin;
  std::vector<int32_t> ids;
  SliceIds(const test::OpShape& s, std::mt19937_64& rng)
      : T(int(s[0])), C(int(s[1])), Vg(int(s[2])), n((Vg + int(s[3]) - 1) / int(s[3])), begin(int(s[4]) * n),
        ids(test::random_ids(T, 0, Vg, rng)) {
    if (begin < Vg) ids[0] = begin;
  }
};

double check_slice_forward(const test::OpShape& s, std::mt19937_64& rng) {
  const SliceIds p(s, rng);
  std::vector<float> wte = test::random_vector(int64_t(p.n) * p.C, rng);
  test::DeviceBuffer<bf16> dwte(int64_t(p.n) * p.C), dout(int64_t(p.T) * p.C);
  test::DeviceBuffer<int32_t> dids(p.T);
  dwte.upload(wte);
  dids.upload_raw(p.ids);
  dout.poison();
  test::inputs_ready();
  hone::cuda::embedding_slice_forward(dout.get(), dids.get(), dwte.get(), p.T, p.C, p.begin, p.n,
                                      test::check_context());
  const std::vector<float> got = dout.download();
  std::vector<float> want(size_t(p.T) * size_t(p.C));
  hone::cpu::embedding_slice_forward(want.data(), p.ids.data(), wte.data(), p.T, p.C, p.begin, p.n);
  return test::rel_l2(got.data(), want.data(), int64_t(p.T) * p.C);
}

double check_slice_backward(const test::OpShape& s, std::mt19937_64& rng) {
  const SliceIds p(s, rng);
  std::vector<float> dwte = test::random_vector(int64_t(p.n) * p.C, rng);
  std::vector<float> dout = test::random_vector(int64_t(p.T) * p.C, rng);
  test::DeviceBuffer<float> ddwte(int64_t(p.n) * p.C);
  test::DeviceBuffer<bf16> ddout(int64_t(p.T) * p.C);
  test::DeviceBuffer<int32_t> dids(p.T);
  ddwte.upload(dwte);
  ddout.upload(dout);
  dids.upload_raw(p.ids);
  test::inputs_ready();
  hone::cuda::embedding_slice_backward(ddwte.get(), ddout.get(), dids.get(), p.T, p.C, p.begin, p.n,
                                       test::check_context());
  const std::vector<float> got = ddwte.download();
  hone::cpu::embedding_slice_backward(dwte.data(), dout.data(), p.ids.data(), p.T, p.C, p.begin, p.n);
  return test::rel_l2(got.data(), dwte.data(), int64_t(p.n) * p.C);
}

const std::vector<test::OpShape> kShapes = {{1, 33, 7}, {7, 1000, 50}, {4096, 1024, 300}, {64, 2048, 5},
                                            {5, 1027, 3}, {300, 4096, 1000}};
// {T, C, Vg, tp, rank}
const std::vector<test::OpShape> kSliceShapes = {
    {1, 33, 7, 3, 1},        // rows [3, 6), scalar path
    {7, 1000, 50, 4, 1},     // rows [13, 26), a middle slice
    {4096, 1024, 300, 3, 2},  // rows [200, 300), the last slice, many repeated ids
    {64, 2048, 5, 8, 6},     // rows [6, 7): padding only, every row zero
    {5, 1027, 3, 2, 1},      // rows [2, 4): one id and one padding row, scalar path
    {300, 4096, 1000, 2, 0},  // rows [0, 500), the first slice
};

const test::OpCheckRegistration reg_fwd{{"embedding_forward", 0.0, kShapes, &check_forward}};
const test::OpCheckRegistration reg_bwd{{"embedding_backward", 1e-5, kShapes, &check_backward}};
const test::OpCheckRegistration reg_slice_fwd{{"embedding_slice_forward", 0.0, kSliceShapes, &check_slice_forward}};
const test::OpCheckRegistration reg_slice_bwd{
    {"embedding_slice_backward", 1e-5, kSliceShapes, &check_slice_backward}};

}  // namespace
#endif  // HONE_CUDA
