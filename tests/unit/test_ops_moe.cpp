// The mixture-of-experts ops of src/ops/cpu/moe.cpp: the router's softmax and top-k (ties, renormalization) and its
// backward against finite differences, the routing plan, permute / unpermute and the grouped linear layers against
// plain loops.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "ops/ops.h"

namespace {

std::vector<float> randn(size_t n, uint32_t seed, float std = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, std);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// sum_a c_a topk_w[a] + sum_e d_e sum_t probs[t, e]: a loss through both outputs of the router.
double router_loss(const std::vector<float>& logits, int T, int E, int k, bool norm, const std::vector<float>& c,
                   const std::vector<float>& d, std::vector<int32_t>* idx_out = nullptr) {
  std::vector<float> probs(size_t(T) * E), w(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, norm);
  double L = 0;
  for (size_t a = 0; a < w.size(); ++a) L += double(c[a]) * w[a];
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e) L += double(d[size_t(e)]) * probs[size_t(t) * E + size_t(e)];
  if (idx_out) *idx_out = idx;
  return L;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ops_moe)

BOOST_AUTO_TEST_CASE(topk_takes_the_largest_probabilities_and_the_lower_id_among_ties) {
  const int T = 3, E = 5, k = 2;
  // Row 0: distinct; row 1: all equal (ties: experts 0 and 1); row 2: a tie for second place (experts 1 and 3).
  const std::vector<float> logits = {0.1f, 2.f, -1.f, 0.5f, 1.f,  //
                                     0.3f, 0.3f, 0.3f, 0.3f, 0.3f,  //
                                     3.f,  1.f,  0.f,  1.f,  -2.f};
  std::vector<float> probs(size_t(T) * E), w(size_t(T) * k);
  std::vector<int32_t> idx(size_t(T) * k);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, false);
  BOOST_TEST(idx == (std::vector<int32_t>{1, 4, 0, 1, 0, 1}), boost::test_tools::per_element());
  for (int t = 0; t < T; ++t) {
    double s = 0;
    for (int e = 0; e < E; ++e) s += probs[size_t(t) * E + size_t(e)];
    BOOST_TEST(std::fabs(s - 1.0) < 1e-6);
    for (int j = 0; j < k; ++j) BOOST_TEST(w[size_t(t) * k + size_t(j)] == probs[size_t(t) * E + size_t(idx[size_t(t) * k + size_t(j)])]);
  }
  BOOST_TEST(std::fabs(probs[5] - 0.2f) < 1e-6);
  hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, true);
  for (int t = 0; t < T; ++t) BOOST_TEST(std::fabs(w[size_t(t) * k] + w[size_t(t) * k + 1] - 1.f) < 1e-6);
  BOOST_TEST(std::fabs(w[2] - 0.5f) < 1e-6);  // tied row: half each
}

BOOST_AUTO_TEST_CASE(topk_backward_matches_finite_differences) {
  const int T = 4, E = 6, k = 3;
  // Logits spread apart (steps of 0.5 plus noise far below) so that a perturbation never changes the selection.
  std::vector<float> logits(size_t(T) * E);
  const auto noise = randn(logits.size(), 3, 0.05f);
  std::mt19937 rng(9);
  for (int t = 0; t < T; ++t) {
    std::vector<int> perm(static_cast<size_t>(E));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int e = 0; e < E; ++e) logits[size_t(t) * E + size_t(e)] = 0.5f * float(perm[size_t(e)]) + noise[size_t(t) * E + size_t(e)];
  }
  const auto c = randn(size_t(T) * k, 4), d = randn(size_t(E), 5);
  for (bool norm : {false, true}) {
    BOOST_TEST_INFO("norm_topk_prob " << norm);
    std::vector<float> probs(size_t(T) * E), w(size_t(T) * k), dlogits(size_t(T) * E, 0.f);
    std::vector<int32_t> idx(size_t(T) * k), idx_fd;
    hone::cpu::moe_topk_forward(probs.data(), idx.data(), w.data(), logits.data(), T, E, k, norm);
    hone::cpu::moe_topk_backward(dlogits.data(), c.data(), d.data(), probs.data(), idx.data(), w.data(), T, E, k, norm);
    const float eps = 1e-3f;
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) {
      std::vector<float> lp = logits, lm = logits;
      lp[i] += eps;
      lm[i] -= eps;
      const double fd = (router_loss(lp, T, E, k, norm, c, d, &idx_fd) - router_loss(lm, T, E, k, norm, c, d)) / (2 * eps);
      BOOST_TEST_REQUIRE(idx_fd == idx);  // the selection held
      worst = std::max(worst, std::fabs(fd - dlogits[i]));
    }
    BOOST_TEST(worst < 2e-3, "max |analytic - finite difference| " << worst);
  }
}

BOOST_AUTO_TEST_CASE(route_sorts_assignments_by_expert_including_empty_and_full_experts) {
  const int T = 4, k = 2, E = 4;
  // Expert 2 gets nothing; expert 0 gets every token.
  const std::vector<int32_t> idx = {0, 1, 3, 0, 0, 3, 1, 0};
  std::vector<int32_t> offsets(E + 1), row_of(T * k), token_of(T * k);
  hone::cpu::moe_route(offsets.data(), row_of.data(), token_of.data(), idx.data(), T, k, E);
  BOOST_TEST(offsets == (std::vector<int32_t>{0, 4, 6, 6, 8}), boost::test_tools::per_element());
  // Within an expert, assignments in order: expert 0 takes a = 0, 3, 4, 7 (tokens 0, 1, 2, 3).
  BOOST_TEST(token_of == (std::vector<int32_t>{0, 1, 2, 3, 0, 3, 1, 2}), boost::test_tools::per_element());
  for (int a = 0; a < T * k; ++a) {
    BOOST_TEST(token_of[size_t(row_of[size_t(a)])] == a / k);
    const int e = idx[size_t(a)];
    BOOST_TEST((row_of[size_t(a)] >= offsets[size_t(e)] && row_of[size_t(a)] < offsets[size_t(e) + 1]));
  }
}

BOOST_AUTO_TEST_CASE(permute_unpermute_and_grouped_linear_match_plain_loops) {
  const int T = 5, k = 2, E = 3, C = 4, OC = 3;
  const std::vector<int32_t> idx = {2, 0, 0, 2, 2, 0, 0, 2, 2, 0};  // expert 1 gets no row
  std::vector<int32_t> offsets(E + 1), row_of(T * k), token_of(T * k);
  hone::cpu::moe_route(offsets.data(), row_of.data(), token_of.data(), idx.data(), T, k, E);
  const int N = T * k;
  const auto x = randn(size_t(T) * C, 1), w = randn(size_t(E) * OC * C, 2), tw = randn(size_t(N), 3);
  std::vector<float> xp(size_t(N) * C), yp(size_t(N) * OC), y(size_t(T) * OC);
  hone::cpu::moe_permute_forward(xp.data(), x.data(), token_of.data(), N, C);
  hone::cpu::moe_grouped_linear_forward(yp.data(), xp.data(), w.data(), offsets.data(), E, C, OC);
  hone::cpu::moe_unpermute_forward(y.data(), yp.data(), row_of.data(), tw.data(), T, k, OC);
  // y[t] = sum_j tw[t, j] W_{idx[t, j]} x[t]
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < OC; ++o) {
      double want = 0;
      for (int j = 0; j < k; ++j) {
        const int e = idx[size_t(t) * k + size_t(j)];
        double dot = 0;
        for (int i = 0; i < C; ++i) dot += double(w[(size_t(e) * OC + size_t(o)) * C + size_t(i)]) * x[size_t(t) * C + size_t(i)];
        want += tw[size_t(t) * k + size_t(j)] * dot;
      }
      BOOST_TEST(std::fabs(y[size_t(t) * OC + size_t(o)] - want) < 1e-5);
    }
  // Backward: the adjoint of each linear map, <dy, f(x)> = <f^T(dy), x>, and the gradients of W and tw against
  // their definitions.
  const auto dy = randn(size_t(T) * OC, 4);
  std::vector<float> dyp(size_t(N) * OC, 0.f), dtw(size_t(N), 0.f), dxp(size_t(N) * C, 0.f), dw(w.size(), 0.f),
      dx(size_t(T) * C, 0.f);
  hone::cpu::moe_unpermute_backward(dyp.data(), dtw.data(), dy.data(), yp.data(), row_of.data(), tw.data(), T, k, OC);
  hone::cpu::moe_grouped_linear_backward(dxp.data(), dw.data(), dyp.data(), xp.data(), w.data(), offsets.data(), E, C, OC);
  hone::cpu::moe_permute_backward(dx.data(), dxp.data(), row_of.data(), T, k, C);
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < y.size(); ++i) lhs += double(dy[i]) * y[i];
  for (size_t i = 0; i < x.size(); ++i) rhs += double(dx[i]) * x[i];
  BOOST_TEST(std::fabs(lhs - rhs) < 1e-4 * std::max(1.0, std::fabs(lhs)));  // y is linear in x
  rhs = 0;
  for (size_t i = 0; i < w.size(); ++i) rhs += double(dw[i]) * w[i];
  BOOST_TEST(std::fabs(lhs - rhs) < 1e-4 * std::max(1.0, std::fabs(lhs)));  // and in W
  for (size_t i = 0; i < size_t(C) * OC; ++i) BOOST_TEST(dw[size_t(OC) * C + i] == 0.f);  // expert 1: no rows
  for (int a = 0; a < N; ++a) {  // dtw[a] = dy[t] . yp[row_of[a]]
    double want = 0;
    for (int o = 0; o < OC; ++o) want += double(dy[size_t(a / k) * OC + size_t(o)]) * yp[size_t(row_of[size_t(a)]) * OC + size_t(o)];
    BOOST_TEST(std::fabs(dtw[size_t(a)] - want) < 1e-5);
  }
}

BOOST_AUTO_TEST_SUITE_END()
