// The hone executable's command line: usage, version, unknown commands, --help and `hone help <command>` for every
// registered command, and errors as the last line of the output.
#include <boost/test/unit_test.hpp>

#include "common/paths.h"
#include "runtime/command.h"

namespace {
// The last line of a command's output (without its newline).
std::string last_line(const std::string& out) {
  std::string s = out;
  if (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(command_line)

BOOST_AUTO_TEST_CASE(version_prints_and_exits_zero) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " version", &out) == 0);
  BOOST_TEST(out.find("hone ") == 0);
}

BOOST_AUTO_TEST_CASE(unknown_command_is_one_line_naming_the_commands) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " frobnicate", &out) == 2);
  BOOST_TEST(out.find("hone: error: unknown command 'frobnicate' (commands: bench, ") == 0);
  BOOST_TEST(out.find('\n') + 1 == out.size());
}

BOOST_AUTO_TEST_CASE(no_arguments_prints_usage_and_exits_two) {
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe(), &out) == 2);
  BOOST_TEST(out.find("usage: hone <command>") != std::string::npos);
  BOOST_TEST(last_line(out) == "hone: error: no command given");
}

// Every registered command answers --help (anywhere in its arguments) and `hone help <name>` with its usage, exit 0,
// without starting: no deck is needed and no MPI starts.
BOOST_AUTO_TEST_CASE(every_command_has_help) {
  BOOST_TEST(hone::commands().size() >= 9u);
  for (const auto& c : hone::commands()) {
    BOOST_TEST_CONTEXT(c.name) {
      std::string out, again, later;
      BOOST_TEST(test::run_command(test::hone_exe() + " " + c.name + " --help", &out) == 0);
      BOOST_TEST(out.find("usage: ") == 0);
      BOOST_TEST(out.find("hone " + c.name) != std::string::npos);
      BOOST_TEST(test::run_command(test::hone_exe() + " help " + c.name, &again) == 0);
      BOOST_TEST(again == out);
      BOOST_TEST(test::run_command(test::hone_exe() + " " + c.name + " x=1 -h", &later) == 0);
      BOOST_TEST(later == out);
    }
  }
  std::string out;
  BOOST_TEST(test::run_command(test::hone_exe() + " help version", &out) == 0);
  BOOST_TEST(out.find("usage: hone version") == 0);
  BOOST_TEST(test::run_command(test::hone_exe() + " --help", &out) == 0);
  for (const auto& c : hone::commands()) BOOST_TEST(out.find("\n  " + c.name + " ") != std::string::npos, c.name);
}

// An argument error is one line, the last of the output: a job log's tail shows it.
BOOST_AUTO_TEST_CASE(argument_errors_are_one_line) {
  for (const char* args : {"logprobs --bogus", "convert --model", "tokenize --kind", "check", "check --bogus d.toml",
                           "run", "help nonsense", "ranks foo=1"}) {
    std::string out;
    BOOST_TEST(test::run_command(test::hone_exe() + " " + args, &out) == 2, args);
    BOOST_TEST(out.find("hone: error: ") == 0, args << ": " << out);
    BOOST_TEST(out.find('\n') + 1 == out.size(), args << ": " << out);
  }
}

BOOST_AUTO_TEST_SUITE_END()
