// The benchmark-only response lengths of the random_tokens task (data/response_length.h): a pure function of (seed,
// prompt, sample), the mean asked for with the cap included, never above the cap, different from sample to sample,
// and the tail the default sigma is documented to give.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "data/response_length.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;

namespace {

data::ResponseLengthOptions lognormal(double mean = 800, int64_t cap = 4096, uint64_t seed = 1) {
  ResponseLengthOptions o;
  o.rule = "lognormal";
  o.mean = mean;
  o.cap = cap;
  o.seed = seed;
  return o;
}

std::string user_error(const data::ResponseLengthOptions& o) {
  try {
    data::ResponseLengths l(o);
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(response_length)

BOOST_AUTO_TEST_CASE(a_draw_is_a_function_of_seed_prompt_and_sample) {
  const data::ResponseLengths a(lognormal()), b(lognormal()), other_seed(lognormal(800, 4096, 2));
  int differ_by_seed = 0;
  for (int64_t p = 0; p < 200; ++p)
    for (int64_t g = 0; g < 8; ++g) {
      BOOST_TEST(a.draw(p, g) == b.draw(p, g));
      differ_by_seed += a.draw(p, g) != other_seed.draw(p, g);
    }
  // Drawing in another order gives the same lengths: no state is carried from draw to draw.
  BOOST_TEST(a.draw(5, 3) == b.draw(5, 3));
  BOOST_TEST(differ_by_seed > 1500);
}

BOOST_AUTO_TEST_CASE(the_mean_is_the_one_asked_for_the_cap_included) {
  for (double mean : {800.0, 300.0}) {
    const data::ResponseLengths l(lognormal(mean));
    // The solved location gives the mean in closed form...
    BOOST_TEST(std::abs(data::capped_lognormal_mean(l.mu(), 0.8, 4096) - mean) < 1e-6 * mean);
    // ... and over many draws (standard error about 0.2 % here).
    double sum = 0;
    const int64_t prompts = 25000, G = 8;
    for (int64_t p = 0; p < prompts; ++p)
      for (int64_t g = 0; g < G; ++g) sum += double(l.draw(p, g));
    const double got = sum / double(prompts * G);
    BOOST_TEST(std::abs(got - mean) < 0.01 * mean, "mean of the draws " << got << " for " << mean);
  }
}

BOOST_AUTO_TEST_CASE(no_length_is_above_the_cap_or_below_one) {
  // A mean near a small cap: many draws land on the cap.
  const data::ResponseLengths l(lognormal(40, 64));
  int64_t at_cap = 0, lo = 1 << 30, hi = 0;
  for (int64_t p = 0; p < 2000; ++p)
    for (int64_t g = 0; g < 8; ++g) {
      const int64_t n = l.draw(p, g);
      lo = std::min(lo, n), hi = std::max(hi, n);
      at_cap += n == 64;
    }
  BOOST_TEST(lo >= 1);
  BOOST_TEST(hi == 64);
  BOOST_TEST(at_cap > 100);
}

BOOST_AUTO_TEST_CASE(the_samples_of_a_prompt_get_different_lengths) {
  const data::ResponseLengths l(lognormal());
  int groups_all_equal = 0;
  std::set<int64_t> first_samples;
  for (int64_t p = 0; p < 100; ++p) {
    std::set<int64_t> group;
    for (int64_t g = 0; g < 8; ++g) group.insert(l.draw(p, g));
    groups_all_equal += group.size() == 1;
    BOOST_TEST(group.size() >= 5u, "prompt " << p << ": " << group.size() << " distinct lengths of 8");
    first_samples.insert(l.draw(p, 0));
  }
  BOOST_TEST(groups_all_equal == 0);
  BOOST_TEST(first_samples.size() > 80u);  // and from prompt to prompt
}

// The numbers doc/performance.md and response_length.h give for the default sigma at mean 800, cap 4096.
BOOST_AUTO_TEST_CASE(the_default_tail_resembles_the_documented_one) {
  const data::ResponseLengths l(lognormal());
  BOOST_TEST(std::abs(std::exp(l.mu()) - 589) < 1.0);  // the median
  int64_t at_cap = 0, n = 0;
  for (int64_t p = 0; p < 25000; ++p)
    for (int64_t g = 0; g < 8; ++g, ++n) at_cap += l.draw(p, g) == 4096;
  const double share = double(at_cap) / double(n);
  BOOST_TEST(std::abs(share - 0.0077) < 0.0015, "share at the cap " << share);
}

BOOST_AUTO_TEST_CASE(fixed_gives_the_mean_and_off_gives_nothing) {
  data::ResponseLengthOptions o = lognormal();
  o.rule = "fixed";
  const data::ResponseLengths fixed(o);
  BOOST_TEST(fixed.on());
  BOOST_TEST(fixed.draw(0, 0) == 800);
  BOOST_TEST(fixed.draw(123, 7) == 800);
  const data::ResponseLengths off;
  BOOST_TEST(!off.on());
  BOOST_TEST(off.draw(3, 1) == 0);
}

BOOST_AUTO_TEST_CASE(bad_options_name_their_key) {
  BOOST_TEST(user_error(lognormal(4096, 4096)).find("data.response_length_mean") != std::string::npos);
  data::ResponseLengthOptions o = lognormal();
  o.sigma = 0;
  BOOST_TEST(user_error(o).find("data.response_length_sigma") != std::string::npos);
  o = lognormal();
  o.rule = "uniform";
  BOOST_TEST(user_error(o).find("allowed: off, lognormal, fixed") != std::string::npos);
  o = lognormal(4097, 4096);
  o.rule = "fixed";
  BOOST_TEST(user_error(o).find("above generation.max_new_tokens") != std::string::npos);
  o.mean = 4096;
  BOOST_TEST(user_error(o) == "(no error)");
}

BOOST_AUTO_TEST_SUITE_END()
