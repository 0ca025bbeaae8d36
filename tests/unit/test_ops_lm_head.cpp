// The LM head fused with log-softmax gather and entropy: forward against full logits and log_softmax in double for
// chunk sizes that divide V, do not divide it, equal it and exceed it, with temperature; rows without a target;
// several row blocks; large logits; and dh, dW (with and without the entropy term) against central differences of
// the double reference and against its closed-form gradient. The saved variant (logits kept by the forward)
// against the chunked forward and the closed-form gradient.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_lm_head)

namespace {

struct Problem {
  int T, C, V;
  float temperature;
  std::vector<float> h, w;
  std::vector<int32_t> targets;
};

Problem make_problem(int T, int C, int V, float temperature, uint64_t seed, float range = 1.f) {
  Problem p{T, C, V, temperature, test::random_floats(test::len(T * C), seed, -range, range),
            test::random_floats(test::len(V * C), seed + 1, -range, range), {}};
  for (int t = 0; t < T; ++t) p.targets.push_back(t % 4 == 1 ? -1 : int32_t((t * 5 + 3) % V));  // some rows masked
  return p;
}

struct Reference {
  std::vector<double> logprob, entropy, lse, dh, dw;
};

// Full logits in double, then log_softmax, entropy; with a and b the gradient of sum a_t logprob_t + b_t entropy_t.
Reference reference(const Problem& p, const std::vector<float>* a = nullptr, const std::vector<float>* b = nullptr) {
  Reference r;
  r.logprob.assign(test::len(p.T), 0.0);
  r.entropy.assign(test::len(p.T), 0.0);
  r.lse.assign(test::len(p.T), 0.0);
  r.dh.assign(p.h.size(), 0.0);
  r.dw.assign(p.w.size(), 0.0);
  std::vector<double> z(test::len(p.V));
  for (int t = 0; t < p.T; ++t) {
    const int tg = p.targets[test::len(t)];
    if (tg < 0) continue;
    double mx = -1e300;
    for (int v = 0; v < p.V; ++v) {
      double d = 0;
      for (int c = 0; c < p.C; ++c) d += double(p.h[test::len(t * p.C + c)]) * p.w[test::len(v * p.C + c)];
      z[test::len(v)] = d / p.temperature;
      mx = std::max(mx, z[test::len(v)]);
    }
    double s = 0;
    for (int v = 0; v < p.V; ++v) s += std::exp(z[test::len(v)] - mx);
    const double lse = mx + std::log(s);
    double H = 0;
    for (int v = 0; v < p.V; ++v) H -= std::exp(z[test::len(v)] - lse) * (z[test::len(v)] - lse);
    r.lse[test::len(t)] = lse;
    r.logprob[test::len(t)] = z[test::len(tg)] - lse;
    r.entropy[test::len(t)] = H;
    if (!a) continue;
    const double ga = (*a)[test::len(t)], gb = b ? (*b)[test::len(t)] : 0.0;
    for (int v = 0; v < p.V; ++v) {
      const double logp = z[test::len(v)] - lse, pv = std::exp(logp);
      const double dz = ga * ((v == tg ? 1.0 : 0.0) - pv) + gb * (-pv * (logp + H));
      const double dlogit = dz / p.temperature;
      for (int c = 0; c < p.C; ++c) {
        r.dh[test::len(t * p.C + c)] += dlogit * p.w[test::len(v * p.C + c)];
        r.dw[test::len(v * p.C + c)] += dlogit * p.h[test::len(t * p.C + c)];
      }
    }
  }
  return r;
}

struct Outputs {
  std::vector<float> logprob, entropy, lse;
};

Outputs forward(const Problem& p, int chunk_v, bool with_entropy = true) {
  Outputs o{test::nan_floats(test::len(p.T)), test::nan_floats(test::len(p.T)), test::nan_floats(test::len(p.T))};
  cpu::lm_head_logprob_forward(o.logprob.data(), with_entropy ? o.entropy.data() : nullptr, o.lse.data(), p.h.data(),
                               p.w.data(), p.targets.data(), p.T, p.C, p.V, p.temperature, chunk_v);
  return o;
}

void check_forward(const Problem& p, int chunk_v, double tol) {
  const Outputs o = forward(p, chunk_v);
  const Reference r = reference(p);
  const std::string tag = " (T=" + std::to_string(p.T) + " V=" + std::to_string(p.V) +
                          " chunk_v=" + std::to_string(chunk_v) + " temperature=" + std::to_string(p.temperature) + ")";
  std::string m = test::mismatch("logprob" + tag, o.logprob.data(), r.logprob.data(), r.logprob.size(), tol, tol);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("entropy" + tag, o.entropy.data(), r.entropy.data(), r.entropy.size(), tol, tol);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("lse" + tag, o.lse.data(), r.lse.data(), r.lse.size(), tol, tol);
  BOOST_TEST(m.empty(), m);
  for (int t = 0; t < p.T; ++t)
    if (p.targets[test::len(t)] < 0) BOOST_TEST((o.logprob[test::len(t)] == 0.f && o.entropy[test::len(t)] == 0.f));
}

}  // namespace

BOOST_AUTO_TEST_CASE(forward_matches_full_log_softmax_for_every_chunking) {
  for (float temperature : {1.f, 0.7f}) {
    const Problem p = make_problem(6, 5, 7, temperature, 1, 2.f);
    for (int chunk_v : {1, 2, 3, 7, 100}) check_forward(p, chunk_v, 1e-5);
  }
  check_forward(make_problem(1, 3, 7, 1.f, 5), 4, 1e-5);  // T = 1
}

BOOST_AUTO_TEST_CASE(forward_over_several_row_blocks) {
  check_forward(make_problem(1200, 8, 37, 1.3f, 11), 10, 1e-5);  // 900 rows with targets: two blocks of 512
}

BOOST_AUTO_TEST_CASE(forward_is_stable_for_large_logits) {
  // Logits in the thousands: exp would overflow without the running max.
  Problem p = make_problem(5, 4, 9, 1.f, 21, 30.f);
  const Outputs o = forward(p, 4);
  BOOST_TEST(test::all_finite(o.logprob.data(), o.logprob.size()));
  BOOST_TEST(test::all_finite(o.entropy.data(), o.entropy.size()));
  const Reference r = reference(p);
  std::string m = test::mismatch("large-logit logprob", o.logprob.data(), r.logprob.data(), r.logprob.size(), 1e-3, 1e-5);
  BOOST_TEST(m.empty(), m);
  m = test::mismatch("large-logit entropy", o.entropy.data(), r.entropy.data(), r.entropy.size(), 1e-5, 1e-3);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_CASE(entropy_is_optional) {
  const Problem p = make_problem(4, 3, 11, 1.f, 31);
  const Outputs with = forward(p, 5), without = forward(p, 5, false);
  BOOST_TEST(with.logprob == without.logprob);
  BOOST_TEST(with.lse == without.lse);
}

// dh and dW against central differences (eps 1e-3) of the double reference, with and without the entropy term.
BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  for (bool with_entropy : {false, true}) {
    for (float temperature : {1.f, 0.6f}) {
      Problem p = make_problem(5, 4, 7, temperature, 41, 1.5f);
      const auto a = test::random_floats(test::len(p.T), 42), b = test::random_floats(test::len(p.T), 43);
      const Outputs o = forward(p, 3);
      auto loss = [&] {
        const Reference r = reference(p);
        double s = 0;
        for (int t = 0; t < p.T; ++t)
          s += a[test::len(t)] * r.logprob[test::len(t)] + (with_entropy ? b[test::len(t)] * r.entropy[test::len(t)] : 0.0);
        return s;
      };
      const auto nh = test::numerical_gradient(p.h.data(), p.h.size(), loss, 1e-3f);
      const auto nw = test::numerical_gradient(p.w.data(), p.w.size(), loss, 1e-3f);
      auto dh = test::random_floats(p.h.size(), 44), dw = test::random_floats(p.w.size(), 45);
      const auto dh0 = dh, dw0 = dw;
      cpu::lm_head_logprob_backward(dh.data(), dw.data(), a.data(), with_entropy ? b.data() : nullptr, p.h.data(),
                                    p.w.data(), p.targets.data(), o.lse.data(), o.entropy.data(), p.T, p.C, p.V,
                                    p.temperature, 3);
      const std::string tag = std::string(with_entropy ? " with" : " without") + " entropy, temperature " +
                              std::to_string(temperature);
      std::string m = test::gradient_mismatch("lm head dh" + tag, test::added(dh, dh0), nh, 1e-4);
      BOOST_TEST(m.empty(), m);
      m = test::gradient_mismatch("lm head dw" + tag, test::added(dw, dw0), nw, 1e-4);
      BOOST_TEST(m.empty(), m);
      for (int t = 0; t < p.T; ++t)  // masked rows receive nothing
        if (p.targets[test::len(t)] < 0)
          for (int c = 0; c < p.C; ++c) BOOST_TEST(dh[test::len(t * p.C + c)] == dh0[test::len(t * p.C + c)]);
    }
  }
}

// Many row blocks and chunk sizes against the closed-form gradient of the double reference.
BOOST_AUTO_TEST_CASE(gradients_match_closed_form_over_row_blocks_and_chunks) {
  Problem p = make_problem(1200, 6, 23, 0.8f, 51);
  const auto a = test::random_floats(test::len(p.T), 52), b = test::random_floats(test::len(p.T), 53);
  const Reference r = reference(p, &a, &b);
  const Outputs o = forward(p, 5);
  for (int chunk_v : {5, 23, 64}) {
    std::vector<float> dh(p.h.size(), 0.f), dw(p.w.size(), 0.f);
    cpu::lm_head_logprob_backward(dh.data(), dw.data(), a.data(), b.data(), p.h.data(), p.w.data(),
                                  p.targets.data(), o.lse.data(), o.entropy.data(), p.T, p.C, p.V, p.temperature,
                                  chunk_v);
    std::string m = test::mismatch("dh chunk_v=" + std::to_string(chunk_v), dh.data(), r.dh.data(), dh.size(), 1e-5,
                                   1e-4);
    BOOST_TEST(m.empty(), m);
    m = test::mismatch("dw chunk_v=" + std::to_string(chunk_v), dw.data(), r.dw.data(), dw.size(), 1e-4, 1e-4);
    BOOST_TEST(m.empty(), m);
  }
}

// The saved variant keeps the logits of its forward: the same outputs as the chunked forward, and the closed-form
// gradient of the double reference (with and without the entropy term, temperature, masked rows untouched).
BOOST_AUTO_TEST_CASE(saved_logits_give_the_same_outputs_and_gradients) {
  Problem p = make_problem(40, 6, 23, 0.8f, 71);
  const auto a = test::random_floats(test::len(p.T), 72), b = test::random_floats(test::len(p.T), 73);
  const Reference r = reference(p, &a, &b);
  const Outputs chunked = forward(p, 5);
  for (bool with_entropy : {true, false}) {
    Outputs o{test::nan_floats(test::len(p.T)), test::nan_floats(test::len(p.T)), test::nan_floats(test::len(p.T))};
    std::vector<float> saved(cpu::lm_head_saved_bytes(p.T, p.V, 5) / sizeof(float), NAN);
    cpu::lm_head_saved_forward(o.logprob.data(), with_entropy ? o.entropy.data() : nullptr, o.lse.data(),
                               saved.data(), p.h.data(), p.w.data(), p.targets.data(), p.T, p.C, p.V, p.temperature,
                               5);
    BOOST_TEST(o.logprob == chunked.logprob);
    BOOST_TEST(o.lse == chunked.lse);
    if (with_entropy) BOOST_TEST(o.entropy == chunked.entropy);
    auto dh = test::random_floats(p.h.size(), 74), dw = test::random_floats(p.w.size(), 75);
    const auto dh0 = dh, dw0 = dw;
    cpu::lm_head_saved_backward(dh.data(), dw.data(), a.data(), with_entropy ? b.data() : nullptr, p.h.data(),
                                p.w.data(), p.targets.data(), o.lse.data(), with_entropy ? o.entropy.data() : nullptr,
                                saved.data(), p.T, p.C, p.V, p.temperature, 5);
    const Reference want = with_entropy ? r : reference(p, &a);
    std::vector<double> inc_dh(dh.size()), inc_dw(dw.size());
    for (size_t i = 0; i < dh.size(); ++i) inc_dh[i] = double(dh[i]) - dh0[i];
    for (size_t i = 0; i < dw.size(); ++i) inc_dw[i] = double(dw[i]) - dw0[i];
    const std::string tag = with_entropy ? " with entropy" : " without entropy";
    std::string m = test::mismatch("saved dh" + tag, inc_dh.data(), want.dh.data(), dh.size(), 1e-4, 1e-4);
    BOOST_TEST(m.empty(), m);
    m = test::mismatch("saved dw" + tag, inc_dw.data(), want.dw.data(), dw.size(), 1e-4, 1e-4);
    BOOST_TEST(m.empty(), m);
    for (int t = 0; t < p.T; ++t)  // masked rows receive nothing
      if (p.targets[test::len(t)] < 0)
        for (int c = 0; c < p.C; ++c) BOOST_TEST(dh[test::len(t * p.C + c)] == dh0[test::len(t * p.C + c)]);
  }
}

BOOST_AUTO_TEST_CASE(full_logits_for_sampling) {
  const int T = 3, C = 5, V = 7;
  auto h = test::random_floats(T * C, 61), w = test::random_floats(V * C, 62);
  auto logits = test::nan_floats(T * V);
  cpu::lm_head_logits(logits.data(), h.data(), w.data(), T, C, V);
  std::vector<double> want(test::len(T * V));
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v)
      for (int c = 0; c < C; ++c) want[test::len(t * V + v)] += double(h[test::len(t * C + c)]) * w[test::len(v * C + c)];
  const std::string m = test::mismatch("logits", logits.data(), want.data(), want.size(), 1e-6, 1e-6);
  BOOST_TEST(m.empty(), m);
}

BOOST_AUTO_TEST_SUITE_END()
