// Where tests find the source tree, the build tree and ../shared (real tokenizer files).
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

namespace test {

std::string source_dir();  // $HONE_SOURCE_DIR, else the current directory
std::string build_dir();   // $HONE_BUILD_DIR, else source_dir()/build
std::string hone_exe();    // build_dir()/hone
std::string shared_dir();  // $HONE_SHARED_DIR, else source_dir()/../shared
std::string temp_dir(const std::string& tag);  // a fresh, empty folder under build_dir()/test-tmp

// Precondition for cases that need ../shared: BOOST_AUTO_TEST_CASE(x, *boost::unit_test::precondition(test::needs_shared))
boost::test_tools::assertion_result needs_shared(boost::unit_test::test_unit_id);

// Runs a shell command, returns its exit status (not the raw wait status) and its stdout+stderr.
int run_command(const std::string& cmd, std::string* output = nullptr);

}  // namespace test
