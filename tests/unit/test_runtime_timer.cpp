// Timer and PhaseTimer: accumulation per phase, the device-sync hook, misuse errors.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/timer.h"

using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(runtime_timer)

BOOST_AUTO_TEST_CASE(timer_measures_wall_clock_and_resets) {
  hone::Timer t;
  std::this_thread::sleep_for(20ms);
  const double s = t.seconds();
  BOOST_TEST(s >= 0.019);
  BOOST_TEST(s < 5.0);
  t.reset();
  BOOST_TEST(t.seconds() < s);
}

BOOST_AUTO_TEST_CASE(phase_timer_accumulates_per_phase) {
  hone::PhaseTimer pt;
  pt.start("generation");
  std::this_thread::sleep_for(15ms);
  pt.stop("generation");
  const double once = pt.seconds("generation");
  BOOST_TEST(once >= 0.014);
  pt.start("training");
  pt.start("generation");  // phases may overlap (total around the others)
  std::this_thread::sleep_for(15ms);
  pt.stop("generation");
  pt.stop("training");
  BOOST_TEST(pt.seconds("generation") >= once + 0.014);
  BOOST_TEST(pt.seconds("training") >= 0.014);
  BOOST_TEST(pt.seconds("refit") == 0.0);
  BOOST_TEST(pt.phases() == (std::vector<std::string>{"generation", "training"}));
  pt.clear();
  BOOST_TEST(pt.phases().empty());
  BOOST_TEST(pt.seconds("generation") == 0.0);
}

BOOST_AUTO_TEST_CASE(sync_hook_runs_at_every_start_and_stop) {
  int syncs = 0;
  hone::PhaseTimer pt([&] { ++syncs; });
  pt.start("logprob");
  BOOST_TEST(syncs == 1);
  pt.stop("logprob");
  BOOST_TEST(syncs == 2);
  {
    auto scope = pt.scope("reward");
    BOOST_TEST(pt.running("reward"));
  }
  BOOST_TEST(!pt.running("reward"));
  BOOST_TEST(syncs == 4);
}

BOOST_AUTO_TEST_CASE(misuse_is_an_internal_error) {
  hone::PhaseTimer pt;
  BOOST_CHECK_THROW(pt.stop("total"), hone::Error);
  pt.start("total");
  BOOST_CHECK_THROW(pt.start("total"), hone::Error);
}

BOOST_AUTO_TEST_CASE(scope_drops_a_failing_sync_while_unwinding) {
  bool fail = false;
  hone::PhaseTimer pt([&] {
    if (fail) throw hone::Error("device lost");
  });
  try {
    auto scope = pt.scope("training");
    fail = true;
    throw hone::UserError("the real problem");
  } catch (const hone::UserError& e) {
    BOOST_TEST(std::string(e.what()) == "the real problem");  // not std::terminate, not the sync error
  }
}

BOOST_AUTO_TEST_SUITE_END()
