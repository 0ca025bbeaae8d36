// The fused per-head q/k norm + RoPE against the two-op chain it replaces (rmsnorm_forward then rope_forward;
// rope_backward then rmsnorm_backward), and its gradients against central finite differences. Also that its
// backward writes dx (no zeroing needed) while dw accumulates.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_qk_norm_rope)

namespace {

struct Case {
  int T, H, D;
  float theta;
  std::vector<int32_t> pos;
  std::vector<float> inv, x, w;
};

Case make_case(int T, int H, int D, float theta, uint64_t seed) {
  Case c{T, H, D, theta, {}, {}, {}, {}};
  RopeParams p;
  p.head_dim = D;
  p.theta = theta;
  c.inv.resize(test::len(D / 2));
  cpu::rope_inv_freq(c.inv.data(), p);
  for (int t = 0; t < T; ++t) c.pos.push_back(int32_t((t * 7 + int(seed)) % 23));  // restarts as in packing
  c.x = test::random_floats(test::len(int64_t(T) * H * D), seed, -2.f, 2.f);
  c.w = test::random_floats(test::len(D), seed + 1, 0.5f, 1.5f);
  return c;
}

std::vector<double> as_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// The fused op equals the chain: forward out and rstd, backward dx and dw (both from pre-filled buffers).
void check_against_chain(const Case& c, uint64_t seed) {
  const int T = c.T, H = c.H, D = c.D;
  const int64_t n = int64_t(T) * H * D, rows = int64_t(T) * H;
  const float eps = 1e-6f;
  auto out = test::nan_floats(test::len(n)), rstd = test::nan_floats(test::len(rows));
  cpu::qk_norm_rope_forward(out.data(), rstd.data(), c.x.data(), c.w.data(), c.pos.data(), c.inv.data(), T, H, D,
                            eps);
  std::vector<float> normed(test::len(n)), chain(test::len(n)), chain_rstd(test::len(rows));
  cpu::rmsnorm_forward(normed.data(), chain_rstd.data(), c.x.data(), c.w.data(), int(rows), D, eps);
  cpu::rope_forward(chain.data(), normed.data(), c.pos.data(), c.inv.data(), T, H, D);
  std::string m = test::mismatch("out", out.data(), as_double(chain).data(), chain.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("rstd", rstd.data(), as_double(chain_rstd).data(), chain_rstd.size(), 0, 1e-6);
  BOOST_TEST(m.empty(), m);

  const auto g = test::random_floats(test::len(n), seed + 2);
  auto dx = test::random_floats(test::len(n), seed + 3);  // garbage: the op overwrites it
  auto dw = test::random_floats(test::len(D), seed + 4);
  const auto dw0 = dw;
  cpu::qk_norm_rope_backward(dx.data(), dw.data(), g.data(), c.x.data(), c.w.data(), rstd.data(), c.pos.data(),
                             c.inv.data(), T, H, D);
  std::vector<float> dn(test::len(n), 0.f), chain_dx(test::len(n), 0.f), chain_dw = dw0;
  cpu::rope_backward(dn.data(), g.data(), c.pos.data(), c.inv.data(), T, H, D);
  cpu::rmsnorm_backward(chain_dx.data(), chain_dw.data(), dn.data(), c.x.data(), c.w.data(), rstd.data(), int(rows),
                        D);
  m = test::mismatch("dx", dx.data(), as_double(chain_dx).data(), chain_dx.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("dw", dw.data(), as_double(chain_dw).data(), chain_dw.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
}

// d(sum r * out)/dx and /dw by central differences.
void check_gradients(Case c, uint64_t seed) {
  const int T = c.T, H = c.H, D = c.D;
  const int64_t n = int64_t(T) * H * D, rows = int64_t(T) * H;
  const float eps = 1e-6f;
  const auto r = test::random_floats(test::len(n), seed + 5);
  auto loss = [&] {
    std::vector<float> o(test::len(n)), rs(test::len(rows));
    cpu::qk_norm_rope_forward(o.data(), rs.data(), c.x.data(), c.w.data(), c.pos.data(), c.inv.data(), T, H, D, eps);
    return test::weighted_sum(o.data(), r.data(), o.size());
  };
  const auto num_dx = test::numerical_gradient(c.x.data(), c.x.size(), loss, 1e-2f);
  const auto num_dw = test::numerical_gradient(c.w.data(), c.w.size(), loss, 1e-2f);
  std::vector<float> out(test::len(n)), rstd(test::len(rows));
  cpu::qk_norm_rope_forward(out.data(), rstd.data(), c.x.data(), c.w.data(), c.pos.data(), c.inv.data(), T, H, D,
                            eps);
  auto dx = test::nan_floats(test::len(n));  // written, never read: NaN here must not leak into the result
  auto dw = test::random_floats(test::len(D), seed + 6);
  const auto dw0 = dw;
  cpu::qk_norm_rope_backward(dx.data(), dw.data(), r.data(), c.x.data(), c.w.data(), rstd.data(), c.pos.data(),
                             c.inv.data(), T, H, D);
  std::string m = test::gradient_mismatch("dx", as_double(dx), num_dx, 2e-3);
  BOOST_TEST(m.empty(), m);
  m = test::gradient_mismatch("dw", test::added(dw, dw0), num_dw, 2e-3);
  BOOST_TEST(m.empty(), m);
}

}  // namespace

BOOST_AUTO_TEST_CASE(matches_the_rmsnorm_then_rope_chain) {
  check_against_chain(make_case(5, 3, 8, 10000.f, 10), 10);
  check_against_chain(make_case(1, 1, 16, 1e6f, 20), 20);
  check_against_chain(make_case(9, 2, 128, 1e6f, 30), 30);  // Qwen3's head_dim and theta
  check_against_chain(make_case(3, 16, 64, 1e6f, 40), 40);
}

// Reading x's rows from a wider buffer (q and k inside one fused QKV product, row stride ldx) gives exactly what the
// same rows give on their own, for the fused op and for plain RoPE; the values between the rows are NaN, so a read
// outside them shows.
BOOST_AUTO_TEST_CASE(strided_rows_give_the_same_outputs) {
  const Case c = make_case(6, 3, 16, 1e6f, 70);
  const int T = c.T, H = c.H, D = c.D;
  const int64_t n = int64_t(T) * H * D, rows = int64_t(T) * H, ldx = int64_t(H) * D + 40;
  std::vector<float> wide = test::nan_floats(test::len(T * ldx));
  for (int t = 0; t < T; ++t)
    std::copy(c.x.begin() + t * H * D, c.x.begin() + (t + 1) * H * D, wide.begin() + t * ldx);
  std::vector<float> want(test::len(n)), want_rstd(test::len(rows)), got(test::len(n)), got_rstd(test::len(rows));
  cpu::qk_norm_rope_forward(want.data(), want_rstd.data(), c.x.data(), c.w.data(), c.pos.data(), c.inv.data(), T, H,
                            D, 1e-6f);
  cpu::qk_norm_rope_forward(got.data(), got_rstd.data(), wide.data(), c.w.data(), c.pos.data(), c.inv.data(), T, H,
                            D, 1e-6f, ldx);
  BOOST_TEST(got == want, boost::test_tools::per_element());
  BOOST_TEST(got_rstd == want_rstd, boost::test_tools::per_element());
  cpu::rope_forward(want.data(), c.x.data(), c.pos.data(), c.inv.data(), T, H, D);
  cpu::rope_forward(got.data(), wide.data(), c.pos.data(), c.inv.data(), T, H, D, ldx);
  BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  check_gradients(make_case(4, 3, 8, 10000.f, 50), 50);
  check_gradients(make_case(3, 2, 16, 1e6f, 60), 60);
}

BOOST_AUTO_TEST_SUITE_END()
