// The vocabulary-parallel LM head and embedding ops: the vocabulary split into tp slices (padded to a multiple of
// tp, padding rows filled with large values that must never count), the slices' statistics combined as the
// tensor-parallel code combines them (max over slices, rescale, sum), against the whole-vocabulary op; the slices'
// backward summed against the whole backward; the slice embedding lookups summed against the whole lookup.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/finite_diff.h"
#include "ops/ops.h"

using namespace hone;

BOOST_AUTO_TEST_SUITE(ops_vocab_slice)

namespace {

struct Slice {
  int begin, rows, valid;  // rows of the padded slice, of which `valid` exist
  std::vector<float> w;    // [rows, C]
};

// The slices of w[V, C] for tp ranks, the vocabulary padded to a multiple of tp; padding rows get `pad_value`.
std::vector<Slice> split(const std::vector<float>& w, int V, int C, int tp, float pad_value) {
  const int padded = (V + tp - 1) / tp * tp, n = padded / tp;
  std::vector<Slice> out;
  for (int r = 0; r < tp; ++r) {
    Slice s{r * n, n, std::clamp(V - r * n, 0, n), std::vector<float>(test::len(n * C), pad_value)};
    std::copy(w.begin() + int64_t(s.begin) * C, w.begin() + int64_t(s.begin + s.valid) * C, s.w.begin());
    out.push_back(std::move(s));
  }
  return out;
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, double tol, const char* what) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST_CONTEXT(what << "[" << i << "]") {
      BOOST_TEST(std::isfinite(a[i]));
      BOOST_TEST(std::abs(double(a[i]) - double(b[i])) <= tol * (1.0 + std::abs(double(b[i]))));
    }
  }
}

void run_case(int T, int C, int V, int tp, float temperature, int chunk_v, uint64_t seed) {
  BOOST_TEST_CONTEXT("T=" << T << " C=" << C << " V=" << V << " tp=" << tp << " chunk_v=" << chunk_v) {
    const auto h = test::random_floats(test::len(T * C), seed, -1.f, 1.f);
    const auto w = test::random_floats(test::len(V * C), seed + 1, -1.f, 1.f);
    std::vector<int32_t> targets;
    for (int t = 0; t < T; ++t) targets.push_back(t % 5 == 2 ? -1 : int32_t((t * 7 + 1) % V));
    // The whole vocabulary.
    std::vector<float> lp(test::len(T)), ent(test::len(T)), lse(test::len(T));
    cpu::lm_head_logprob_forward(lp.data(), ent.data(), lse.data(), h.data(), w.data(), targets.data(), T, C, V,
                                 temperature, chunk_v);
    // The slices, combined: max over slices, rescale, sum of s, u and the target logit.
    const auto slices = split(w, V, C, tp, 30.f);
    std::vector<std::vector<float>> stats;
    std::vector<float> gmax(test::len(T), -std::numeric_limits<float>::infinity());
    for (const Slice& s : slices) {
      stats.emplace_back(test::len(4 * T), std::nanf(""));
      cpu::lm_head_vocab_slice_forward(stats.back().data(), h.data(), s.w.data(), targets.data(), T, C, s.rows,
                                       s.begin, s.valid, temperature, chunk_v);
      for (int t = 0; t < T; ++t) gmax[test::len(t)] = std::max(gmax[test::len(t)], stats.back()[test::len(t)]);
    }
    std::vector<float> sum(test::len(4 * T), 0.f);
    for (auto& st : stats) {
      cpu::lm_head_stats_rescale(st.data(), gmax.data(), T);
      for (int i = T; i < 4 * T; ++i) sum[test::len(i)] += st[test::len(i)];
    }
    std::copy(gmax.begin(), gmax.end(), sum.begin());
    std::vector<float> lp2(test::len(T), std::nanf("")), ent2 = lp2, lse2 = lp2;
    cpu::lm_head_stats_finish(lp2.data(), ent2.data(), lse2.data(), sum.data(), targets.data(), T);
    check_close(lp2, lp, 1e-5, "logprob");
    check_close(ent2, ent, 1e-5, "entropy");
    check_close(lse2, lse, 1e-5, "lse");

    // Backward: the slices' dh add up to the whole dh; each slice's dw is the whole dw's rows.
    const auto a = test::random_floats(test::len(T), seed + 2, -1.f, 1.f);
    const auto b = test::random_floats(test::len(T), seed + 3, -1.f, 1.f);
    std::vector<float> dh(test::len(T * C), 0.f), dw(test::len(V * C), 0.f);
    cpu::lm_head_logprob_backward(dh.data(), dw.data(), a.data(), b.data(), h.data(), w.data(), targets.data(),
                                  lse.data(), ent.data(), T, C, V, temperature, chunk_v);
    std::vector<float> dh2(test::len(T * C), 0.f);
    for (const Slice& s : slices) {
      std::vector<float> dws(s.w.size(), 0.f);
      cpu::lm_head_vocab_slice_backward(dh2.data(), dws.data(), a.data(), b.data(), h.data(), s.w.data(),
                                        targets.data(), lse.data(), ent.data(), T, C, s.rows, s.begin, s.valid,
                                        temperature, chunk_v);
      std::vector<float> expect(s.w.size(), 0.f);  // padding rows get no gradient
      std::copy(dw.begin() + int64_t(s.begin) * C, dw.begin() + int64_t(s.begin + s.valid) * C, expect.begin());
      check_close(dws, expect, 1e-5, "dw slice");
    }
    check_close(dh2, dh, 1e-5, "dh");

    // The embedding: the slices' lookups add up to the whole lookup; the slices' dwte are the whole one's rows.
    std::vector<int32_t> ids;
    for (int t = 0; t < T; ++t) ids.push_back(int32_t((t * 11 + 4) % V));
    std::vector<float> e(test::len(T * C)), de(test::len(V * C), 0.f);
    cpu::embedding_forward(e.data(), ids.data(), w.data(), T, C);
    cpu::embedding_backward(de.data(), h.data(), ids.data(), T, C);
    std::vector<float> e2(test::len(T * C), 0.f);
    for (const Slice& s : slices) {
      std::vector<float> part(test::len(T * C), std::nanf("")), des(s.w.size(), 0.f);
      cpu::embedding_slice_forward(part.data(), ids.data(), s.w.data(), T, C, s.begin, s.rows);
      for (size_t i = 0; i < e2.size(); ++i) e2[i] += part[i];
      cpu::embedding_slice_backward(des.data(), h.data(), ids.data(), T, C, s.begin, s.rows);
      std::vector<float> expect(s.w.size(), 0.f);
      std::copy(de.begin() + int64_t(s.begin) * C, de.begin() + int64_t(s.begin + s.valid) * C, expect.begin());
      check_close(des, expect, 0, "dwte slice");
    }
    check_close(e2, e, 0, "embedding");
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(slices_combine_to_the_whole_vocabulary) {
  run_case(9, 16, 37, 2, 1.0f, 8, 11);   // padded: 38 rows, the last one padding
  run_case(9, 16, 37, 4, 0.7f, 5, 12);   // padded: 40 rows, 3 of padding in the last slice
  run_case(6, 8, 5, 8, 1.3f, 64, 13);    // more ranks than tokens: slices of padding only
  run_case(700, 8, 33, 3, 1.0f, 7, 14);  // several row blocks
}

BOOST_AUTO_TEST_SUITE_END()
