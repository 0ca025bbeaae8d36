// Learning-rate schedules at their key steps: warmup start and end, decay midpoints, the end of decay and after.
#include <boost/test/unit_test.hpp>

#include "runtime/error.h"
#include "train/lr_schedule.h"

namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(lr_schedule)

hone::LrSchedule schedule(hone::LrDecay d) {
  hone::LrSchedule s;
  s.learning_rate = 1e-3f;
  s.min_learning_rate = 1e-4f;
  s.warmup_steps = 10;
  s.decay_steps = 110;
  s.decay = d;
  return s;
}

BOOST_AUTO_TEST_CASE(warmup_is_linear_from_zero) {
  const auto s = schedule(hone::LrDecay::cosine);
  BOOST_TEST(s.lr(1) == 1e-4f, tt::tolerance(1e-5f));
  BOOST_TEST(s.lr(5) == 5e-4f, tt::tolerance(1e-5f));
  BOOST_TEST(s.lr(10) == 1e-3f, tt::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(constant_holds_the_peak) {
  const auto s = schedule(hone::LrDecay::constant);
  BOOST_TEST(s.lr(11) == 1e-3f);
  BOOST_TEST(s.lr(5000) == 1e-3f);
  hone::LrSchedule plain;
  plain.learning_rate = 2e-6f;
  BOOST_TEST(plain.lr(1) == 2e-6f);  // no warmup: the peak from the first step
}

BOOST_AUTO_TEST_CASE(linear_decay) {
  const auto s = schedule(hone::LrDecay::linear);
  BOOST_TEST(s.lr(60) == 5.5e-4f, tt::tolerance(1e-5f));   // halfway: (1e-3 + 1e-4) / 2
  BOOST_TEST(s.lr(110) == 1e-4f, tt::tolerance(1e-5f));
  BOOST_TEST(s.lr(500) == 1e-4f, tt::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(cosine_decay) {
  const auto s = schedule(hone::LrDecay::cosine);
  BOOST_TEST(s.lr(35) == 8.682e-4f, tt::tolerance(1e-4f));  // a quarter: 1e-4 + 4.5e-4 (1 + cos(pi/4))
  BOOST_TEST(s.lr(60) == 5.5e-4f, tt::tolerance(1e-5f));
  BOOST_TEST(s.lr(110) == 1e-4f, tt::tolerance(1e-5f));
  BOOST_TEST(s.lr(111) == 1e-4f, tt::tolerance(1e-5f));
}

BOOST_AUTO_TEST_CASE(names_parse_and_unknown_is_a_user_error) {
  BOOST_TEST((hone::parse_lr_decay("cosine") == hone::LrDecay::cosine));
  BOOST_TEST(std::string(hone::lr_decay_name(hone::LrDecay::linear)) == "linear");
  BOOST_CHECK_THROW(hone::parse_lr_decay("exponential"), hone::UserError);
}

BOOST_AUTO_TEST_SUITE_END()
