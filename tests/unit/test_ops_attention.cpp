// Causal attention over packed sequences with grouped-query heads: forward and lse against a naive per-sequence
// softmax in double, packing independence, and dq/dk/dv against central differences of the double reference.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_attention)

namespace {

struct Shape {
  std::vector<int32_t> cu;  // cu_seqlens
  int T, Hq, Hkv, D;
  int num_seqs() const { return int(cu.size()) - 1; }
};

// out[T, Hq, D] and lse[Hq, T] in double, one sequence and one head at a time, the softmax written out in full.
void reference(std::vector<double>& out, std::vector<double>& lse, const std::vector<float>& q,
               const std::vector<float>& k, const std::vector<float>& v, const Shape& s, double scale) {
  out.assign(test::len(s.T * s.Hq * s.D), 0.0);
  lse.assign(test::len(s.Hq * s.T), 0.0);
  const int group = s.Hq / s.Hkv;
  for (int seq = 0; seq < s.num_seqs(); ++seq) {
    const int b = s.cu[test::len(seq)], e = s.cu[test::len(seq + 1)];
    for (int h = 0; h < s.Hq; ++h) {
      const int g = h / group;
      for (int i = b; i < e; ++i) {
        std::vector<double> sc;
        double mx = -1e300;
        for (int j = b; j <= i; ++j) {
          double d = 0;
          for (int c = 0; c < s.D; ++c)
            d += double(q[test::len((i * s.Hq + h) * s.D + c)]) * k[test::len((j * s.Hkv + g) * s.D + c)];
          sc.push_back(scale * d);
          mx = std::max(mx, scale * d);
        }
        double sum = 0;
        for (double& x : sc) sum += (x = std::exp(x - mx));
        for (int j = b; j <= i; ++j)
          for (int c = 0; c < s.D; ++c)
            out[test::len((i * s.Hq + h) * s.D + c)] +=
                sc[test::len(j - b)] / sum * v[test::len((j * s.Hkv + g) * s.D + c)];
        lse[test::len(h * s.T + i)] = mx + std::log(sum);
      }
    }
  }
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs random_inputs(const Shape& s, uint64_t seed) {
  return {test::random_floats(test::len(s.T * s.Hq * s.D), seed, -2.f, 2.f),
          test::random_floats(test::len(s.T * s.Hkv * s.D), seed + 1, -2.f, 2.f),
          test::random_floats(test::len(s.T * s.Hkv * s.D), seed + 2)};
}

void forward(std::vector<float>& out, std::vector<float>& lse, const Inputs& in, const Shape& s, float scale) {
  out = test::nan_floats(test::len(s.T * s.Hq * s.D));
  lse = test::nan_floats(test::len(s.Hq * s.T));
  cpu::attention_forward(out.data(), lse.data(), in.q.data(), in.k.data(), in.v.data(), s.cu.data(), s.num_seqs(),
                         s.T, s.Hq, s.Hkv, s.D, scale);
}

}  // namespace

BOOST_AUTO_TEST_CASE(forward_matches_naive_softmax_for_packed_gqa) {
  for (int Hkv : {4, 2, 1}) {  // Hq / Hkv = 1, 2, 4
    const Shape s{{0, 3, 4, 9}, 9, 4, Hkv, 5};
    const float scale = 1.f / std::sqrt(float(s.D));
    const Inputs in = random_inputs(s, 100 + uint64_t(Hkv));
    std::vector<float> out, lse;
    forward(out, lse, in, s, scale);
    std::vector<double> want, want_lse;
    reference(want, want_lse, in.q, in.k, in.v, s, scale);
    std::string m = test::mismatch("attention out, Hkv=" + std::to_string(Hkv), out.data(), want.data(), want.size(),
                                   1e-5, 1e-5);
    BOOST_TEST(m.empty(), m);
    m = test::mismatch("attention lse", lse.data(), want_lse.data(), want_lse.size(), 1e-5, 1e-5);
    BOOST_TEST(m.empty(), m);
  }
}

BOOST_AUTO_TEST_CASE(packed_sequences_equal_each_sequence_alone) {
  const Shape s{{0, 4, 5, 11}, 11, 4, 2, 6};
  const float scale = 0.4f;
  const Inputs in = random_inputs(s, 7);
  std::vector<float> out, lse;
  forward(out, lse, in, s, scale);
  for (int seq = 0; seq < s.num_seqs(); ++seq) {
    const int b = s.cu[test::len(seq)], n = s.cu[test::len(seq + 1)] - b;
    const Shape one{{0, n}, n, s.Hq, s.Hkv, s.D};
    auto rows = [&](const std::vector<float>& x, int H) {
      return std::vector<float>(x.begin() + b * H * s.D, x.begin() + (b + n) * H * s.D);
    };
    const Inputs alone{rows(in.q, s.Hq), rows(in.k, s.Hkv), rows(in.v, s.Hkv)};
    std::vector<float> o1, l1;
    forward(o1, l1, alone, one, scale);
    BOOST_TEST(o1 == rows(out, s.Hq));
    for (int h = 0; h < s.Hq; ++h)
      for (int i = 0; i < n; ++i) BOOST_TEST(l1[test::len(h * n + i)] == lse[test::len(h * s.T + b + i)]);
  }
}

BOOST_AUTO_TEST_CASE(first_token_copies_its_value) {
  const Shape s{{0, 1}, 1, 2, 1, 3};  // T = 1: the only key is itself, probability 1
  const Inputs in = random_inputs(s, 9);
  std::vector<float> out, lse;
  forward(out, lse, in, s, 0.5f);
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 3; ++c) BOOST_TEST(out[test::len(h * 3 + c)] == in.v[test::len(c)]);
}

// dq, dk, dv of L = sum r * out against central differences (eps 1e-3) of the double reference.
BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  for (int Hkv : {4, 2, 1}) {
    const Shape s{{0, 3, 4, 8}, 8, 4, Hkv, 3};
    const float scale = 1.f / std::sqrt(float(s.D));
    Inputs in = random_inputs(s, 200 + uint64_t(Hkv));
    std::vector<float> out, lse;
    forward(out, lse, in, s, scale);
    const auto r = test::random_floats(out.size(), 300);
    auto loss = [&] {
      std::vector<double> o, l;
      reference(o, l, in.q, in.k, in.v, s, scale);
      double sum = 0;
      for (size_t i = 0; i < o.size(); ++i) sum += r[i] * o[i];
      return sum;
    };
    const auto nq = test::numerical_gradient(in.q.data(), in.q.size(), loss, 1e-3f);
    const auto nk = test::numerical_gradient(in.k.data(), in.k.size(), loss, 1e-3f);
    const auto nv = test::numerical_gradient(in.v.data(), in.v.size(), loss, 1e-3f);
    // Backward writes its gradients: NaN-filled buffers are overwritten.
    auto dq = test::nan_floats(in.q.size()), dk = test::nan_floats(in.k.size()), dv = test::nan_floats(in.v.size());
    cpu::attention_backward(dq.data(), dk.data(), dv.data(), r.data(), out.data(), lse.data(), in.q.data(),
                            in.k.data(), in.v.data(), s.cu.data(), s.num_seqs(), s.T, s.Hq, s.Hkv, s.D, scale);
    const std::string tag = ", Hq/Hkv=" + std::to_string(s.Hq / Hkv);
    auto wide = [](const std::vector<float>& g) { return std::vector<double>(g.begin(), g.end()); };
    std::string m = test::gradient_mismatch("attention dq" + tag, wide(dq), nq, 1e-4);
    BOOST_TEST(m.empty(), m);
    m = test::gradient_mismatch("attention dk" + tag, wide(dk), nk, 1e-4);
    BOOST_TEST(m.empty(), m);
    m = test::gradient_mismatch("attention dv" + tag, wide(dv), nv, 1e-4);
    BOOST_TEST(m.empty(), m);
  }
}

BOOST_AUTO_TEST_SUITE_END()
