// Stop signals: SIGUSR1/SIGTERM set the flag the GRPO loop polls; a second one ends the process
// (tests/programs/stop_signal).
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <string>

#include "common/paths.h"

namespace {
std::string program() { return test::build_dir() + "/tests/programs/stop_signal"; }
}  // namespace

BOOST_AUTO_TEST_SUITE(runtime_signals)

BOOST_AUTO_TEST_CASE(first_signal_sets_the_stop_flag) {
  std::string out;
  BOOST_TEST(test::run_command(program() + " once", &out) == 3);
  BOOST_TEST(out.find("rank 0 before: 0") != std::string::npos);
  BOOST_TEST(out.find("rank 0 after: 1 signal " + std::to_string(SIGUSR1) + " any rank: 1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(second_signal_ends_the_process) {
  std::string out;
  BOOST_TEST(test::run_command(program() + " twice", &out) == 128 + SIGTERM);
  BOOST_TEST(out.find("rank 0 after: 1 signal " + std::to_string(SIGTERM)) != std::string::npos);
  BOOST_TEST(out.find("still running") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_signal_on_one_rank_stops_every_rank) {
  std::string out;
  const int status =
      test::run_command("timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root " + program() + " rank1", &out);
  BOOST_TEST(status == 3);
  BOOST_TEST(out.find("rank 0 after: 0 signal 0 any rank: 1") != std::string::npos);
  BOOST_TEST(out.find("rank 1 after: 1 signal " + std::to_string(SIGUSR1) + " any rank: 1") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
