// The row-wise and elementwise CPU ops: embedding, RMSNorm, SwiGLU, residual add. Forward against reference
// formulas in double, backward against central finite differences of L = sum r * out, accumulation into pre-filled
// gradients.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_elementwise)

BOOST_AUTO_TEST_CASE(embedding_gathers_rows_and_scatter_adds_gradients) {
  const int V = 7, C = 3, T = 5;
  const std::vector<int32_t> ids = {4, 0, 4, 6, 4};  // a repeated id must add up in dwte
  auto wte = test::random_floats(size_t(V) * C, 1);
  auto out = test::nan_floats(size_t(T) * C);
  cpu::embedding_forward(out.data(), ids.data(), wte.data(), T, C);
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) BOOST_TEST(out[size_t(t * C + c)] == wte[size_t(ids[size_t(t)] * C + c)]);

  auto dout = test::random_floats(size_t(T) * C, 2);
  auto dwte = test::random_floats(size_t(V) * C, 3);
  const auto before = dwte;
  cpu::embedding_backward(dwte.data(), dout.data(), ids.data(), T, C);
  std::vector<double> want(before.begin(), before.end());
  for (int t = 0; t < T; ++t)
    for (int c = 0; c < C; ++c) want[size_t(ids[size_t(t)] * C + c)] += dout[size_t(t * C + c)];
  const std::string m = test::mismatch("dwte", dwte.data(), want.data(), want.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
  BOOST_TEST(dwte[size_t(1 * C)] == before[size_t(1 * C)]);  // an unused row is untouched
}

// RMSNorm forward vs double; dx, dw vs finite differences; both accumulate.
static void check_rmsnorm(int rows, int C, uint64_t seed) {
  const float eps = 1e-6f;
  auto x = test::random_floats(size_t(rows) * C, seed, -2.f, 2.f);
  auto w = test::random_floats(size_t(C), seed + 1, 0.5f, 1.5f);
  auto r = test::random_floats(size_t(rows) * C, seed + 2);
  auto out = test::nan_floats(x.size());
  auto rstd = test::nan_floats(size_t(rows));
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), rows, C, eps);

  std::vector<double> want(x.size()), want_rstd(test::len(rows));
  for (int i = 0; i < rows; ++i) {
    double ss = 0;
    for (int c = 0; c < C; ++c) ss += double(x[size_t(i * C + c)]) * x[size_t(i * C + c)];
    want_rstd[size_t(i)] = 1.0 / std::sqrt(ss / C + eps);
    for (int c = 0; c < C; ++c) want[size_t(i * C + c)] = w[size_t(c)] * x[size_t(i * C + c)] * want_rstd[size_t(i)];
  }
  std::string m = test::mismatch("rmsnorm out", out.data(), want.data(), want.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("rmsnorm rstd", rstd.data(), want_rstd.data(), want_rstd.size(), 0, 1e-6);
  BOOST_TEST(m.empty(), m);

  auto loss = [&] {
    std::vector<float> o(x.size()), rs(test::len(rows));
    cpu::rmsnorm_forward(o.data(), rs.data(), x.data(), w.data(), rows, C, eps);
    return test::weighted_sum(o.data(), r.data(), o.size());
  };
  const auto num_dx = test::numerical_gradient(x.data(), x.size(), loss, 1e-2f);
  const auto num_dw = test::numerical_gradient(w.data(), w.size(), loss, 1e-2f);
  auto dx = test::random_floats(x.size(), seed + 3), dw = test::random_floats(w.size(), seed + 4);
  const auto dx0 = dx, dw0 = dw;
  cpu::rmsnorm_backward(dx.data(), dw.data(), r.data(), x.data(), w.data(), rstd.data(), rows, C);
  m = test::gradient_mismatch("rmsnorm dx", test::added(dx, dx0), num_dx, 2e-3);
  BOOST_TEST(m.empty(), m);
  m = test::gradient_mismatch("rmsnorm dw", test::added(dw, dw0), num_dw, 2e-3);
  BOOST_TEST(m.empty(), m);
  // Written, not accumulated: a NaN dx is overwritten; dw still accumulates.
  auto dx_w = test::nan_floats(x.size());
  auto dw_w = dw0;
  cpu::rmsnorm_backward(dx_w.data(), dw_w.data(), r.data(), x.data(), w.data(), rstd.data(), rows, C, false);
  m = test::gradient_mismatch("rmsnorm dx written", std::vector<double>(dx_w.begin(), dx_w.end()), num_dx, 2e-3);
  BOOST_TEST(m.empty(), m);
  m = test::gradient_mismatch("rmsnorm dw (dx written)", test::added(dw_w, dw0), num_dw, 2e-3);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_CASE(rmsnorm_forward_and_gradients) {
  check_rmsnorm(5, 7, 10);
  check_rmsnorm(1, 3, 20);
  check_rmsnorm(12, 4, 30);  // the q/k-norm shape: rows = T * H, C = D
}

BOOST_AUTO_TEST_CASE(swiglu_forward_and_gradients) {
  const int64_t N = 37;
  auto gate = test::random_floats(size_t(N), 40, -4.f, 4.f), up = test::random_floats(size_t(N), 41, -2.f, 2.f);
  auto r = test::random_floats(size_t(N), 42);
  auto out = test::nan_floats(size_t(N));
  cpu::swiglu_forward(out.data(), gate.data(), up.data(), N);
  std::vector<double> want(test::len(N));
  for (size_t i = 0; i < size_t(N); ++i) want[i] = double(gate[i]) / (1.0 + std::exp(-double(gate[i]))) * up[i];
  std::string m = test::mismatch("swiglu out", out.data(), want.data(), want.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);

  auto loss = [&] {
    std::vector<float> o(test::len(N));
    cpu::swiglu_forward(o.data(), gate.data(), up.data(), N);
    return test::weighted_sum(o.data(), r.data(), o.size());
  };
  const auto num_dg = test::numerical_gradient(gate.data(), gate.size(), loss, 1e-2f);
  const auto num_du = test::numerical_gradient(up.data(), up.size(), loss, 1e-2f);
  auto dg = test::random_floats(size_t(N), 43), du = test::random_floats(size_t(N), 44);
  const auto dg0 = dg, du0 = du;
  cpu::swiglu_backward(dg.data(), du.data(), r.data(), gate.data(), up.data(), N, true);
  m = test::gradient_mismatch("swiglu dgate", test::added(dg, dg0), num_dg, 1e-3);
  BOOST_TEST(m.empty(), m);
  m = test::gradient_mismatch("swiglu dup", test::added(du, du0), num_du, 1e-3);
  BOOST_TEST(m.empty(), m);
  // Written, not accumulated: NaN buffers are overwritten.
  auto dg_w = test::nan_floats(size_t(N)), du_w = test::nan_floats(size_t(N));
  cpu::swiglu_backward(dg_w.data(), du_w.data(), r.data(), gate.data(), up.data(), N, false);
  m = test::gradient_mismatch("swiglu dgate written", std::vector<double>(dg_w.begin(), dg_w.end()), num_dg, 1e-3);
  BOOST_TEST(m.empty(), m);
  m = test::gradient_mismatch("swiglu dup written", std::vector<double>(du_w.begin(), du_w.end()), num_du, 1e-3);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_CASE(swiglu_is_finite_for_large_gates) {
  const std::vector<float> gate = {-200.f, -90.f, 90.f, 200.f}, up = {1.f, 1.f, 1.f, 1.f}, dout = {1.f, 1.f, 1.f, 1.f};
  auto out = test::nan_floats(4);
  cpu::swiglu_forward(out.data(), gate.data(), up.data(), 4);
  BOOST_TEST(test::all_finite(out.data(), 4));
  BOOST_TEST(std::fabs(out[0]) < 1e-30f);
  BOOST_TEST(out[3] == 200.f);
  std::vector<float> dg(4, 0.f), du(4, 0.f);
  cpu::swiglu_backward(dg.data(), du.data(), dout.data(), gate.data(), up.data(), 4, true);
  BOOST_TEST(test::all_finite(dg.data(), 4));
  BOOST_TEST(dg[3] == 1.f);
}

BOOST_AUTO_TEST_CASE(add_forward_sums_and_may_run_in_place) {
  auto a = test::random_floats(9, 50), b = test::random_floats(9, 51);
  auto out = test::nan_floats(9);
  cpu::add_forward(out.data(), a.data(), b.data(), 9);
  for (size_t i = 0; i < 9; ++i) BOOST_TEST(out[i] == a[i] + b[i]);
  cpu::add_forward(a.data(), a.data(), b.data(), 9);
  for (size_t i = 0; i < 9; ++i) BOOST_TEST(a[i] == out[i]);
}

BOOST_AUTO_TEST_SUITE_END()
