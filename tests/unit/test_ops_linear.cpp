// The linear layer on OpenBLAS: forward with and without bias against a double reference, every gradient against
// the exact formulas (dx = dout W, dW = dout^T x, dbias = column sums), accumulation, dx written without
// accumulation, and the optional gradients.
#include <boost/test/unit_test.hpp>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_linear)

static void check_linear(int T, int IC, int OC, bool with_bias, uint64_t seed) {
  auto x = test::random_floats(test::len(int64_t(T) * IC), seed);
  auto w = test::random_floats(test::len(int64_t(OC) * IC), seed + 1);  // [OC, IC] as Hugging Face stores it
  auto b = test::random_floats(test::len(OC), seed + 2);
  auto out = test::nan_floats(test::len(int64_t(T) * OC));
  cpu::linear_forward(out.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, T, IC, OC);
  std::vector<double> want(out.size());
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < OC; ++o) {
      double s = with_bias ? b[test::len(o)] : 0.0;
      for (int i = 0; i < IC; ++i) s += double(x[test::len(t * IC + i)]) * w[test::len(o * IC + i)];
      want[test::len(t * OC + o)] = s;
    }
  std::string m = test::mismatch("linear out", out.data(), want.data(), want.size(), 1e-5, 1e-5);
  BOOST_TEST(m.empty(), m);

  auto dout = test::random_floats(out.size(), seed + 3);
  auto dx = test::random_floats(x.size(), seed + 4), dw = test::random_floats(w.size(), seed + 5);
  auto db = test::random_floats(b.size(), seed + 6);
  const auto dx0 = dx, dw0 = dw, db0 = db;
  cpu::linear_backward(dx.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), x.data(), w.data(), T, IC,
                       OC, true);
  std::vector<double> want_dx(dx.size()), want_dw(dw.size()), want_db(db.size());
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < OC; ++o) {
      const double g = dout[test::len(t * OC + o)];
      for (int i = 0; i < IC; ++i) {
        want_dx[test::len(t * IC + i)] += g * w[test::len(o * IC + i)];
        want_dw[test::len(o * IC + i)] += g * x[test::len(t * IC + i)];
      }
      want_db[test::len(o)] += g;
    }
  m = test::mismatch("linear dx", test::added(dx, dx0).data(), want_dx.data(), dx.size(), 1e-5, 1e-5);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("linear dw", test::added(dw, dw0).data(), want_dw.data(), dw.size(), 1e-5, 1e-5);
  BOOST_TEST(m.empty(), m);
  if (with_bias) {
    m = test::mismatch("linear dbias", test::added(db, db0).data(), want_db.data(), db.size(), 1e-5, 1e-5);
    BOOST_TEST(m.empty(), m);
  } else {
    BOOST_TEST(db == db0);
  }
  // Written, not accumulated: a NaN dx is overwritten; dw still accumulates.
  auto dx_w = test::nan_floats(x.size());
  auto dw_w = dw0;
  cpu::linear_backward(dx_w.data(), dw_w.data(), nullptr, dout.data(), x.data(), w.data(), T, IC, OC, false);
  m = test::mismatch("linear dx written", dx_w.data(), want_dx.data(), dx.size(), 1e-5, 1e-5);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("linear dw (dx written)", test::added(dw_w, dw0).data(), want_dw.data(), dw.size(), 1e-5, 1e-5);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_CASE(linear_forward_and_gradients) {
  check_linear(5, 7, 3, true, 1);
  check_linear(5, 7, 3, false, 10);
  check_linear(1, 3, 1, true, 20);
  check_linear(33, 17, 65, true, 30);
}

BOOST_AUTO_TEST_CASE(linear_backward_without_dx_leaves_it_alone) {
  const int T = 4, IC = 3, OC = 2;
  auto x = test::random_floats(12, 40), w = test::random_floats(6, 41), dout = test::random_floats(8, 42);
  std::vector<float> dw(6, 0.f);
  cpu::linear_backward(nullptr, dw.data(), nullptr, dout.data(), x.data(), w.data(), T, IC, OC, false);
  double want = 0;  // dW[1, 2]
  for (int t = 0; t < T; ++t) want += double(dout[test::len(t * OC + 1)]) * x[test::len(t * IC + 2)];
  BOOST_TEST(dw[5] == want, boost::test_tools::tolerance(1e-5));
}

BOOST_AUTO_TEST_CASE(linear_backward_in_two_calls_equals_one) {
  const int T = 6, IC = 5, OC = 4;
  auto x = test::random_floats(test::len(T * IC), 50), w = test::random_floats(test::len(OC * IC), 51);
  auto dout = test::random_floats(test::len(T * OC), 52);
  std::vector<float> dx1(size_t(T * IC), 0.5f), dw1(size_t(OC * IC), 0.25f), db1(size_t(OC), 1.f);
  std::vector<float> dx2 = dx1, dw2 = dw1, db2 = db1;
  cpu::linear_backward(dx1.data(), dw1.data(), db1.data(), dout.data(), x.data(), w.data(), T, IC, OC, true);
  // The input gradient by rows (two calls), then the weight and bias gradients.
  cpu::linear_backward(dx2.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), 2, IC, OC, true);
  cpu::linear_backward(dx2.data() + 2 * IC, nullptr, nullptr, dout.data() + 2 * OC, x.data() + 2 * IC, w.data(),
                       T - 2, IC, OC, true);
  cpu::linear_backward(nullptr, dw2.data(), db2.data(), dout.data(), x.data(), w.data(), T, IC, OC, true);
  const auto tol = boost::test_tools::tolerance(1e-5f);
  BOOST_TEST(dx2 == dx1, tol << boost::test_tools::per_element());
  BOOST_TEST(dw2 == dw1, tol << boost::test_tools::per_element());
  BOOST_TEST(db2 == db1, tol << boost::test_tools::per_element());
}

// With no output features dx is zero: written, it is zeroed; accumulated, it is left as it was.
BOOST_AUTO_TEST_CASE(linear_backward_without_outputs_writes_zero_dx) {
  const int T = 3, IC = 4;
  const std::vector<float> x(12, 1.f), w, dout;
  auto dx = test::nan_floats(12);
  cpu::linear_backward(dx.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), T, IC, 0, false);
  BOOST_TEST(dx == std::vector<float>(12, 0.f), boost::test_tools::per_element());
  std::vector<float> dx2(12, 2.f);
  cpu::linear_backward(dx2.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), T, IC, 0, true);
  BOOST_TEST(dx2 == std::vector<float>(12, 2.f), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
