// reward.library: the example plug-in (build/examples/libexact_match_reward.so, built by make from
// examples/reward/exact_match.c) scores through the ABI of include/hone/reward_plugin.h, and plug-ins that are
// missing, incomplete, of another ABI version, or that fail are refused by name. The broken plug-ins are compiled
// here with the system C compiler, from a few lines each.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "common/paths.h"
#include "reward/plugin_reward.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;
using namespace hone::reward;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string example_plugin() { return test::build_dir() + "/examples/libexact_match_reward.so"; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// Compiles `body` (C, after the ABI header) into <dir>/lib<name>.so and returns its path.
std::string build_plugin(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string src = dir + "/" + name + ".c", lib = dir + "/lib" + name + ".so";
  std::ofstream(src) << "#include <stdio.h>\n#include <math.h>\n#include \"hone/reward_plugin.h\"\n" << body;
  std::string out;
  const int rc = test::run_command("cc -std=c11 -fPIC -shared -I" + test::source_dir() + "/include -o " + lib + " " +
                                       src,
                                   &out);
  BOOST_TEST_INFO(out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  return lib;
}

const char* kBasics =
    "int hone_reward_abi_version(void) { return HONE_REWARD_ABI_VERSION; }\n"
    "void* hone_reward_create(const char* o, int r, char* e, size_t n) { (void)o; (void)r; (void)e; (void)n; "
    "static int s; return &s; }\n"
    "void hone_reward_destroy(void* s) { (void)s; }\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(reward_plugin)

BOOST_AUTO_TEST_CASE(example_plugin_scores_exact_first_lines) {
  reward::PluginReward r(example_plugin(), "", 0);
  BOOST_TEST(r.score_names() == std::vector<std::string>({"answered", "chars"}));
  data::Prompt p;
  p.text = "rev:7=";
  p.answer = "7";
  const std::vector<std::string> completions = {" 7 \nmore", "8", "", "77"};
  std::vector<reward::RewardQuery> q;
  for (const auto& c : completions) q.push_back({&p, c, 1, false, 1});
  const auto res = r.score(q);
  BOOST_REQUIRE(res.size() == 4u);
  BOOST_TEST(res[0].reward == 1.0);
  BOOST_TEST(res[0].correct);
  BOOST_TEST(res[1].reward == 0.0);
  BOOST_TEST(!res[1].correct);
  BOOST_REQUIRE(res[2].scores.size() == 2u);
  BOOST_TEST(res[2].scores[0].name == "answered");
  BOOST_TEST(res[2].scores[0].value == 0.0);
  BOOST_TEST(res[0].scores[1].value == 8.0);  // chars
  // Its option "exact" keeps the spaces, so " 7 " is not "7"; an unknown option is refused by create.
  reward::PluginReward exact(example_plugin(), "exact", 0);
  BOOST_TEST(exact.score(q)[0].reward == 0.0);
  const std::string e = error_of([] { reward::PluginReward bad(example_plugin(), "fuzzy", 0); });
  BOOST_TEST(contains(e, "hone_reward_create failed (reward.library_options = \"fuzzy\"): unknown option 'fuzzy'"));
}

BOOST_AUTO_TEST_CASE(broken_plugins_are_refused_by_name) {
  const std::string dir = test::temp_dir("reward-plugins");
  std::string e = error_of([&] { reward::PluginReward r(dir + "/libnothere.so", "", 0); });
  BOOST_TEST(contains(e, "reward.library = \"" + dir + "/libnothere.so\": cannot load it"));

  e = error_of([&] { reward::PluginReward r(build_plugin(dir, "noscore", kBasics), "", 0); });
  BOOST_TEST(contains(e, "does not export hone_reward_score"));

  const std::string score_ok =
      "int hone_reward_score(void* s, const hone_reward_query* q, hone_reward_result* r, size_t n, char* e, "
      "size_t en) { (void)s; (void)q; (void)e; (void)en; for (size_t i = 0; i < n; ++i) r[i].reward = 2; return 0; }\n";
  e = error_of([&] {
    reward::PluginReward r(build_plugin(dir, "v2", std::string(kBasics).replace(
                                               std::string(kBasics).find("HONE_REWARD_ABI_VERSION"), 23, "2") +
                                               score_ok),
                   "", 0);
  });
  BOOST_TEST(contains(e, "built for reward plug-in ABI version 2, this hone speaks version 1"));

  e = error_of([&] {
    reward::PluginReward r(build_plugin(dir, "halfnames", kBasics + score_ok +
                                                      "int hone_reward_num_scores(void* s) { (void)s; return 1; }\n"),
                   "", 0);
  });
  BOOST_TEST(contains(e, "exports one of hone_reward_num_scores and hone_reward_score_name but not the other"));

  e = error_of([&] {
    reward::PluginReward r(build_plugin(dir, "badname", kBasics + score_ok +
                                                    "int hone_reward_num_scores(void* s) { (void)s; return 1; }\n"
                                                    "const char* hone_reward_score_name(void* s, int i) { (void)s; "
                                                    "(void)i; return \"a b\"; }\n"),
                   "", 0);
  });
  BOOST_TEST(contains(e, "sub-score 0 is named \"a b\""));

  data::Prompt p;
  p.text = "q";
  const std::vector<reward::RewardQuery> q = {{&p, "c", 1, false, 5}};
  reward::PluginReward two(build_plugin(dir, "two", kBasics + score_ok), "", 0);
  BOOST_TEST(two.score(q)[0].reward == 2.0);
  BOOST_TEST(two.score(q)[0].correct);  // correct not said: reward > 0

  reward::PluginReward failing(
      build_plugin(dir, "failing", kBasics + std::string("int hone_reward_score(void* s, const hone_reward_query* q, "
                                                         "hone_reward_result* r, size_t n, char* e, size_t en) { "
                                                         "(void)s; (void)r; (void)n; snprintf(e, en, \"judge "
                                                         "unreachable at step %d\", (int)q[0].step); return 7; }\n")),
      "", 1);
  e = error_of([&] { failing.score(q); });
  BOOST_TEST(contains(e, "on rank 1: hone_reward_score failed at step 5 (7): judge unreachable at step 5"));

  reward::PluginReward nan(build_plugin(dir, "nan", kBasics + std::string("int hone_reward_score(void* s, const "
                                                                  "hone_reward_query* q, hone_reward_result* r, "
                                                                  "size_t n, char* e, size_t en) { (void)s; (void)q; "
                                                                  "(void)e; (void)en; r[n - 1].reward = NAN; return 0; "
                                                                  "}\n")),
                   "", 0);
  e = error_of([&] { nan.score(q); });
  BOOST_TEST(contains(e, "the reward of rollout 1 of 1 at step 5 is nan (a reward must be finite)"));

  reward::PluginReward huge(build_plugin(dir, "huge", kBasics + std::string("int hone_reward_score(void* s, const "
                                                                    "hone_reward_query* q, hone_reward_result* r, "
                                                                    "size_t n, char* e, size_t en) { (void)s; (void)q; "
                                                                    "(void)e; (void)en; r[n - 1].reward = 1e39; "
                                                                    "return 0; }\n")),
                    "", 0);
  e = error_of([&] { huge.score(q); });
  BOOST_TEST(contains(e, "the reward of rollout 1 of 1 at step 5 is 1e+39, beyond the range of a 32-bit float"), e);
}

// A plug-in calling exit(0) inside hone_reward_score made hone exit 0 mid-run (no checkpoint, no done line). Now
// that exit is hone's user error: one line on stderr, exit 2. Run in a child process, since it ends it.
BOOST_AUTO_TEST_CASE(a_plugin_that_calls_exit_ends_hone_with_a_user_error) {
  const std::string dir = test::temp_dir("reward-plugin-exit");
  const std::string lib = build_plugin(dir, "exits", kBasics + std::string("#include <stdlib.h>\n"
                                                                      "int hone_reward_score(void* s, const "
                                                                      "hone_reward_query* q, hone_reward_result* r, "
                                                                      "size_t n, char* e, size_t en) { (void)s; "
                                                                      "(void)q; (void)r; (void)n; (void)e; (void)en; "
                                                                      "exit(0); }\n"));
  const std::string log = dir + "/stderr";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    data::Prompt p;
    p.text = "q";
    reward::PluginReward r(lib, "", 0);
    r.score({{&p, "c", 1, false, 5}});
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 2);
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  BOOST_TEST(line == "hone: error: reward.library: the plug-in called exit() inside hone_reward_score; a plug-in "
                     "reports a failure by its return value and error text");
}

BOOST_AUTO_TEST_SUITE_END()
