// GPU op checks for the moves of per-row fp32 values between two row orders (context parallelism's splits): exact
// copies, tolerance 0. Shapes {n, full}: n rows moved, full rows in the caller's order. scatter_rows_f32 writes the
// rows whose index is not -1 (a random injective map, about a tenth dropped) into a full buffer holding random
// values (the rows it leaves alone must keep them); take_rows_f32 reads random rows, -1 giving 0, into a poisoned
// buffer.
#if HONE_CUDA
#include <algorithm>
#include <numeric>

#include "check_common.h"
#include "cuda/context_parallel_kernels.h"
#include "device_buffer.h"
#include "op_checks.h"
#include "ops/ops.h"

namespace {

std::vector<int32_t> injective_rows(int64_t n, int64_t full, std::mt19937_64& rng) {
  std::vector<int32_t> perm(static_cast<size_t>(full));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> rows(static_cast<size_t>(n), -1);
  for (int64_t p = 0; p < n && p < full; ++p) rows[size_t(p)] = rng() % 10 == 0 ? -1 : perm[size_t(p)];
  return rows;
}

double check_scatter(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t n = s[0], full = s[1];
  std::vector<float> all = test::random_vector(n, rng), out = test::random_vector(full, rng);
  const std::vector<int32_t> rows = injective_rows(n, full, rng);
  test::DeviceBuffer<float> dall(n), dout(full);
  test::DeviceBuffer<int32_t> drows(n);
  dall.upload(all);
  dout.upload(out);
  drows.upload_raw(rows);
  test::inputs_ready();
  hone::cuda::scatter_rows_f32(dout.get(), dall.get(), drows.get(), n, test::check_context());
  const std::vector<float> got = dout.download();
  hone::cpu::scatter_rows_f32(out.data(), all.data(), rows.data(), n);
  return test::rel_l2(got.data(), out.data(), full);
}

double check_take(const test::OpShape& s, std::mt19937_64& rng) {
  const int64_t n = s[0], full = s[1];
  std::vector<float> in = test::random_vector(full, rng);
  const std::vector<int32_t> rows = test::random_ids(n, -1, int(full), rng);
  test::DeviceBuffer<float> din(full), dout(n);
  test::DeviceBuffer<int32_t> drows(n);
  din.upload(in);
  drows.upload_raw(rows);
  dout.poison();
  test::inputs_ready();
  hone::cuda::take_rows_f32(dout.get(), din.get(), drows.get(), n, test::check_context());
  const std::vector<float> got = dout.download();
  std::vector<float> want(static_cast<size_t>(n));
  hone::cpu::take_rows_f32(want.data(), in.data(), rows.data(), n);
  return test::rel_l2(got.data(), want.data(), n);
}

const std::vector<test::OpShape> kShapes = {{1, 1}, {7, 9}, {64, 64}, {1000, 1337}, {4099, 8192}};
const test::OpCheckRegistration reg_scatter{{"scatter_rows_f32", 0.0, kShapes, &check_scatter}};
const test::OpCheckRegistration reg_take{{"take_rows_f32", 0.0, kShapes, &check_take}};

}  // namespace
#endif  // HONE_CUDA
