// Logging: levels, streams, rank 0 only by default, "[rank r] " prefixes when every rank logs, whole lines from
// many threads. Output is captured by running tests/programs/log_lines (alone and under mpirun).
#include <boost/test/unit_test.hpp>

#include <regex>
#include <sstream>
#include <string>

#include "common/paths.h"
#include "runtime/error.h"
#include "runtime/log.h"

namespace {

std::string program() { return test::build_dir() + "/tests/programs/log_lines"; }
const std::string kMpirun = "timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root ";

// stdout only: stderr of the program itself is dropped (run_command adds 2>&1 outside the parentheses).
int stdout_of(const std::string& cmd, std::string* out) { return test::run_command("(" + cmd + " 2>/dev/null)", out); }
int stderr_of(const std::string& cmd, std::string* out) {
  return test::run_command("(" + cmd + " 2>&1 >/dev/null)", out);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(runtime_log)

BOOST_AUTO_TEST_CASE(level_names_parse_and_bad_ones_are_user_errors) {
  BOOST_TEST(static_cast<int>(hone::parse_log_level("debug")) == static_cast<int>(hone::LogLevel::debug));
  BOOST_TEST(static_cast<int>(hone::parse_log_level("warn")) == static_cast<int>(hone::LogLevel::warn));
  BOOST_TEST(std::string(hone::log_level_name(hone::LogLevel::error)) == "error");
  BOOST_CHECK_THROW(hone::parse_log_level("loud"), hone::UserError);
}

BOOST_AUTO_TEST_CASE(in_process_level_filter) {
  const hone::LogLevel before = hone::log_level();
  hone::set_log_level(hone::LogLevel::warn);
  BOOST_TEST(!hone::log_enabled(hone::LogLevel::info));
  BOOST_TEST(hone::log_enabled(hone::LogLevel::error));
  hone::set_log_level(before);
}

BOOST_AUTO_TEST_CASE(info_to_stdout_warnings_and_errors_to_stderr) {
  std::string out, err;
  BOOST_TEST(stdout_of(program(), &out) == 0);
  BOOST_TEST(out == "info line\ntwo\nlines\n");  // debug is below the default level
  BOOST_TEST(stderr_of(program(), &err) == 0);
  BOOST_TEST(err == "warning: warn line\nerror: error line\n");
}

BOOST_AUTO_TEST_CASE(level_from_the_environment) {
  std::string out, err;
  BOOST_TEST(stdout_of("HONE_LOG_LEVEL=debug " + program(), &out) == 0);
  BOOST_TEST(out == "debug: debug line\ninfo line\ntwo\nlines\n");
  BOOST_TEST(stdout_of("HONE_LOG_LEVEL=error " + program(), &out) == 0);
  BOOST_TEST(out == "");
  BOOST_TEST(stderr_of("HONE_LOG_LEVEL=error " + program(), &err) == 0);
  BOOST_TEST(err == "error: error line\n");
  BOOST_TEST(test::run_command("HONE_LOG_LEVEL=loud " + program(), &err) == 2);
  BOOST_TEST(err.find("hone: error: HONE_LOG_LEVEL: unknown log level 'loud'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(two_ranks_log_once_by_default) {
  std::string out;
  BOOST_TEST(stdout_of(kMpirun + program(), &out) == 0);
  BOOST_TEST(out == "info line\ntwo\nlines\n");
}

BOOST_AUTO_TEST_CASE(all_ranks_logging_prefixes_every_line) {
  std::string out, err;
  BOOST_TEST(stdout_of(kMpirun + "-x HONE_LOG_ALL_RANKS=1 " + program(), &out) == 0);
  for (int r = 0; r < 2; ++r) {
    const std::string p = "[rank " + std::to_string(r) + "] ";
    BOOST_TEST(count(out, p + "info line\n") == 1u);
    BOOST_TEST(count(out, p + "two\n" + p + "lines\n") == 1u);
  }
  BOOST_TEST(count(out, "\n") == 6u);
  BOOST_TEST(stderr_of(kMpirun + "-x HONE_LOG_ALL_RANKS=1 " + program(), &err) == 0);
  BOOST_TEST(count(err, "[rank 1] warning: warn line\n") == 1u);
  BOOST_TEST(count(err, "[rank 0] error: error line\n") == 1u);
}

BOOST_AUTO_TEST_CASE(lines_from_many_threads_stay_whole) {
  std::string out;
  BOOST_TEST(stdout_of(program() + " threads", &out) == 0);
  std::istringstream lines(out);
  std::string line;
  const std::regex whole("thread [0-9]+ line [0-9]+ [x]{64}");
  int n = 0, bad = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (!std::regex_match(line, whole)) ++bad;
  }
  BOOST_TEST(n == 8 * 200);
  BOOST_TEST(bad == 0);
}

BOOST_AUTO_TEST_SUITE_END()
