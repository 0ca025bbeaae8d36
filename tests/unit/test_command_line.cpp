// The hone executable's command line: usage, version, unknown commands.
#include <boost/test/unit_test.hpp>

#include "common/paths.h"

BOOST_AUTO_TEST_SUITE(command_line)

BOOST_AUTO_TEST_CASE(version_prints_and_exits_zero) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " version", &out) == 0);
  BOOST_TEST(out.find("hone ") == 0);
}

BOOST_AUTO_TEST_CASE(unknown_command_exits_two) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " frobnicate", &out) == 2);
  BOOST_TEST(out.find("unknown command 'frobnicate'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(no_arguments_prints_usage_and_exits_two) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe(), &out) == 2);
  BOOST_TEST(out.find("usage: hone <command>") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
