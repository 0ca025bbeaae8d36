// The CPU sampler: greedy, each filter on hand-made logits, the filter order, the inverse-CDF order, the recorded
// logprob, sampling frequencies against the filtered distribution, and reproducibility of seeded draws.
#include <boost/test/unit_test.hpp>

#include <string>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "ops/philox.h"
#include "generation/sampler.h"
#include "runtime/error.h"

namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

// The tokens with nonzero probability.
std::vector<int> support(const std::vector<double>& dist) {
  std::vector<int> s;
  for (size_t i = 0; i < dist.size(); ++i)
    if (dist[i] > 0) s.push_back(static_cast<int>(i));
  return s;
}

// Upper 0.1% point of chi-square with k degrees of freedom (Wilson-Hilferty).
double chi2_critical_001(int k) {
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + 3.090 * std::sqrt(a), 3.0);
}

hone::SamplingParams params(float t = 1.0f, int64_t k = 0, float p = 1.0f, float m = 0.0f) {
  hone::SamplingParams s;
  s.temperature = t, s.top_k = k, s.top_p = p, s.min_p = m;
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sampler)

BOOST_AUTO_TEST_CASE(greedy_takes_argmax_lowest_id_on_ties) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  hone::SamplingParams g = params(0.7f);
  g.greedy = true;
  for (float u : {0.0f, 0.5f, 0.999f}) {
    const hone::SampledToken t = hone::sample_token(l, g, u);
    BOOST_TEST(t.token == 1);
    BOOST_TEST(t.logprob == static_cast<float>(hone::temperature_logprob(l, 0.7f, 1)));
  }
  BOOST_TEST(hone::greedy_token(l) == 1);
  const std::vector<double> d = hone::sampling_distribution(l, g);
  BOOST_TEST(d[1] == 1.0);
  BOOST_TEST(support(d) == std::vector<int>({1}));
}

BOOST_AUTO_TEST_CASE(temperature_scales_the_distribution) {
  const std::vector<float> l = {1.0f, 2.0f, 0.0f};
  const std::vector<double> d = hone::sampling_distribution(l, params(2.0f));
  const double z = std::exp(0.5) + std::exp(1.0) + 1.0;
  BOOST_TEST(d[0] == std::exp(0.5) / z, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(d[1] == std::exp(1.0) / z, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(d[2] == 1.0 / z, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(hone::temperature_logprob(l, 2.0f, 1) == 1.0 - std::log(z), boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(top_k_keeps_the_k_largest_and_ties_at_the_boundary) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 2.5f, 0.0f};
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 1))) == std::vector<int>({1}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 2))) == std::vector<int>({1, 3}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 3))) == std::vector<int>({1, 2, 3}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 5))).size() == 5u);
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 99))).size() == 5u);
  const std::vector<float> tied = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  BOOST_TEST(support(hone::sampling_distribution(tied, params(1, 2))) == std::vector<int>({1, 2, 3}));
  // Renormalized over the kept tokens.
  const std::vector<double> d = hone::sampling_distribution(l, params(1, 2));
  BOOST_TEST(d[1] == std::exp(3.0) / (std::exp(3.0) + std::exp(2.5)), boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(top_p_keeps_the_smallest_most_probable_set) {
  const std::vector<float> l = logits_of({0.05, 0.5, 0.15, 0.3});
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 0.45f))) == std::vector<int>({1}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 0.75f))) == std::vector<int>({1, 3}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 0.85f))) == std::vector<int>({1, 2, 3}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 0.99f))) == std::vector<int>({0, 1, 2, 3}));
  const std::vector<double> d = hone::sampling_distribution(l, params(1, 0, 0.75f));
  BOOST_TEST(d[1] == 0.5 / 0.8, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(d[3] == 0.3 / 0.8, boost::test_tools::tolerance(1e-6));
  // Tokens tied with the last one taken are all kept.
  const std::vector<float> tied = logits_of({0.4, 0.2, 0.2, 0.2});
  BOOST_TEST(support(hone::sampling_distribution(tied, params(1, 0, 0.5f))).size() == 4u);
  BOOST_TEST(support(hone::sampling_distribution(tied, params(1, 0, 0.3f))) == std::vector<int>({0}));
}

// On a 1000-token row where the top-p set needs hundreds of tokens, the kept set equals a plain full-sort reference.
BOOST_AUTO_TEST_CASE(top_p_matches_a_full_sort_reference_on_a_large_row) {
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 2.0f * hone::philox_uniform(8, 0, 0, static_cast<uint32_t>(i), 9);
  l[17] = l[400];  // a tie somewhere
  for (float top_p : {0.1f, 0.5f, 0.9f, 0.999f}) {
    std::vector<double> w;
    double z = 0;
    for (float x : l) z += std::exp(static_cast<double>(x));
    for (float x : l) w.push_back(std::exp(static_cast<double>(x)) / z);
    std::vector<double> sorted = w;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    double acc = 0, threshold = 0;
    for (double x : sorted)
      if ((acc += x) >= top_p) {
        threshold = x;
        break;
      }
    std::vector<int> expect;
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] >= threshold) expect.push_back(static_cast<int>(i));
    const std::vector<int> got = support(hone::sampling_distribution(l, params(1, 0, top_p)));
    BOOST_TEST_MESSAGE("top_p " << top_p << " keeps " << got.size());
    BOOST_TEST(got == expect);
  }
}

BOOST_AUTO_TEST_CASE(min_p_drops_tokens_below_a_fraction_of_the_top_probability) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 1, 0.2f))) == std::vector<int>({0, 1, 2}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 1, 0.5f))) == std::vector<int>({0, 1}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 1, 1.0f))) == std::vector<int>({0}));
}

// top-k first, then top-p on the renormalized kept set: with k = 3 the two best tokens hold 0.8/0.95 = 0.842 of
// the mass, enough for p = 0.83; without top-k they hold 0.8 and a third token is needed.
BOOST_AUTO_TEST_CASE(filters_apply_in_order_temperature_top_k_top_p_min_p) {
  const std::vector<float> l = logits_of({0.5, 0.3, 0.15, 0.05});
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 3, 0.83f))) == std::vector<int>({0, 1}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1, 0, 0.83f))) == std::vector<int>({0, 1, 2}));
  // Temperature before the filters: at T = 0.5 the probabilities are (25, 9, 2.25, 0.25)/36.5, so min-p 0.12
  // (threshold 3/36.5) drops token 2, which it keeps at T = 1 (0.15 >= 0.06).
  BOOST_TEST(support(hone::sampling_distribution(l, params(0.5f, 0, 1, 0.12f))) == std::vector<int>({0, 1}));
  BOOST_TEST(support(hone::sampling_distribution(l, params(1.0f, 0, 1, 0.12f))) == std::vector<int>({0, 1, 2}));
}

// The draw walks kept tokens by ascending id: with four equal tokens, u in [0.25 j, 0.25 (j+1)) picks token j.
BOOST_AUTO_TEST_CASE(inverse_cdf_runs_over_kept_tokens_by_ascending_id) {
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f, 0.0f};
  BOOST_TEST(hone::sample_token(flat, params(), 0.0f).token == 0);
  BOOST_TEST(hone::sample_token(flat, params(), 0.3f).token == 1);
  BOOST_TEST(hone::sample_token(flat, params(), 0.6f).token == 2);
  BOOST_TEST(hone::sample_token(flat, params(), 0.9999f).token == 3);
  const std::vector<float> two = {0.0f, 5.0f, 0.0f, 5.0f};
  BOOST_TEST(hone::sample_token(two, params(1, 2), 0.4f).token == 1);
  BOOST_TEST(hone::sample_token(two, params(1, 2), 0.6f).token == 3);
  // A token whose weight underflows to zero is never drawn, even at u = 0.
  const std::vector<float> tiny = {-2000.0f, 0.0f};
  BOOST_TEST(hone::sample_token(tiny, params(), 0.0f).token == 1);
}

// The recorded logprob is the full-vocabulary temperature-scaled one, not the filtered distribution's.
BOOST_AUTO_TEST_CASE(recorded_logprob_is_full_vocabulary_temperature_logprob) {
  const std::vector<float> l = {0.3f, 1.7f, -0.4f, 1.1f, 0.9f, -2.0f};
  const hone::SamplingParams p = params(0.8f, 2, 0.9f, 0.1f);
  for (float u : {0.1f, 0.5f, 0.9f}) {
    const hone::SampledToken t = hone::sample_token(l, p, u);
    BOOST_TEST(hone::sampling_distribution(l, p)[t.token] > 0.0);
    double z = 0;
    for (float x : l) z += std::exp(x / 0.8);
    BOOST_TEST(t.logprob == l[t.token] / 0.8 - std::log(z), boost::test_tools::tolerance(1e-6));
    BOOST_TEST(t.logprob < std::log(hone::sampling_distribution(l, p)[t.token]));
  }
}

// Frequencies of 100,000 seeded draws match the filtered distribution (chi-square below the 0.1% point), for
// several filter settings on one random 24-token row.
BOOST_AUTO_TEST_CASE(frequencies_match_the_filtered_distribution) {
  std::vector<float> l(24);
  for (size_t i = 0; i < l.size(); ++i) l[i] = 3.0f * (hone::philox_uniform(5, 0, 0, static_cast<uint32_t>(i), 9) - 0.5f);
  const std::vector<hone::SamplingParams> settings = {params(1.0f), params(0.7f, 10), params(1.3f, 0, 0.8f),
                                                      params(1.0f, 0, 1.0f, 0.3f), params(0.9f, 12, 0.9f, 0.05f)};
  const int n = 100000;
  for (size_t s = 0; s < settings.size(); ++s) {
    const std::vector<double> dist = hone::sampling_distribution(l, settings[s]);
    std::vector<int> counts(l.size(), 0);
    for (int i = 0; i < n; ++i)
      counts[hone::sample_token(l, settings[s], 77, static_cast<uint32_t>(s), static_cast<uint32_t>(i / 100),
                                static_cast<uint32_t>(i % 100)).token]++;
    double chi2 = 0;
    int kept = 0;
    for (size_t t = 0; t < l.size(); ++t) {
      if (dist[t] == 0) {
        BOOST_TEST(counts[t] == 0);
        continue;
      }
      ++kept;
      const double e = dist[t] * n;
      chi2 += (counts[t] - e) * (counts[t] - e) / e;
    }
    BOOST_TEST_MESSAGE("setting " << s << " kept " << kept << " chi2 " << chi2);
    BOOST_TEST(kept >= 2);
    BOOST_TEST(chi2 < chi2_critical_001(kept - 1));
  }
}

BOOST_AUTO_TEST_CASE(same_counter_same_token_regardless_of_call_order) {
  std::vector<std::vector<float>> rows(8, std::vector<float>(50));
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < 50; ++i)
      rows[r][i] = 4.0f * hone::philox_uniform(3, 1, static_cast<uint32_t>(r), static_cast<uint32_t>(i), 9);
  const hone::SamplingParams p = params(0.9f, 20, 0.95f);
  std::vector<int32_t> forward, backward(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) forward.push_back(hone::sample_token(rows[r], p, 42, 7, 100 + r, 5).token);
  for (size_t r = rows.size(); r-- > 0;) {
    hone::sample_token(rows[(r * 3) % rows.size()], p, 42, 8, 0, 0);  // unrelated draws in between
    backward[r] = hone::sample_token(rows[r], p, 42, 7, 100 + r, 5).token;
  }
  BOOST_TEST(forward == backward);
  // Different counters do give different draws somewhere.
  int differ = 0;
  for (size_t r = 0; r < rows.size(); ++r) differ += hone::sample_token(rows[r], p, 43, 7, 100 + r, 5).token != forward[r];
  for (uint32_t pos = 0; pos < 20; ++pos) differ += hone::sample_token(rows[0], p, 42, 7, 100, pos).token != forward[0];
  BOOST_TEST(differ > 0);
}

BOOST_AUTO_TEST_CASE(bad_parameters_are_user_errors) {
  const std::vector<float> l = {0.0f, 1.0f};
  BOOST_CHECK_THROW(hone::sample_token(l, params(0.0f), 0.5f), hone::UserError);
  BOOST_CHECK_THROW(hone::sample_token(l, params(1, -1), 0.5f), hone::UserError);
  BOOST_CHECK_THROW(hone::sample_token(l, params(1, 0, 0.0f), 0.5f), hone::UserError);
  BOOST_CHECK_THROW(hone::sample_token(l, params(1, 0, 1.5f), 0.5f), hone::UserError);
  BOOST_CHECK_THROW(hone::sample_token(l, params(1, 0, 1, -0.1f), 0.5f), hone::UserError);
  // NaN logits (a diverging run, a broken model file) are the user's to fix: one line naming the keys.
  const std::vector<float> bad = {0.0f, NAN};
  BOOST_CHECK_EXCEPTION(hone::sample_token(bad, params(), 0.5f), hone::UserError, [](const hone::UserError& e) {
    return std::string(e.what()).find("train.learning_rate") != std::string::npos;
  });
  BOOST_CHECK_THROW(hone::greedy_token(bad), hone::UserError);
  const std::vector<float> inf = {-INFINITY, -INFINITY};
  BOOST_CHECK_THROW(hone::sample_token(inf, params(), 0.5f), hone::UserError);
  BOOST_CHECK_THROW(hone::greedy_token(inf), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()
