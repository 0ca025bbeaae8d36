// GPU op checks for the token embedding. Forward is a bf16 row copy (exact: tolerance 0); backward adds bf16 dout
// rows into a random fp32 dwte with atomics, so only the order of fp32 additions differs from the serial CPU sum
// (tolerance 1e-5). Shapes {T, C, V}: small V forces many repeated ids; C = 33 and 1027 take the scalar path.
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

const std::vector<test::OpShape> kShapes = {{1, 33, 7}, {7, 1000, 50}, {4096, 1024, 300}, {64, 2048, 5},
                                            {5, 1027, 3}, {300, 4096, 1000}};

const test::OpCheckRegistration reg_fwd{{"embedding_forward", 0.0, kShapes, &check_forward}};
const test::OpCheckRegistration reg_bwd{{"embedding_backward", 1e-5, kShapes, &check_backward}};

}  // namespace
#endif  // HONE_CUDA
