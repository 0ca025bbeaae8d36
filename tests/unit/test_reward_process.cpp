// reward.command's parts: the JSON-lines protocol (request lines, reply parsing), the child process under a
// deadline (no deadlock on full pipes, timeouts, exits, stderr tails, a child that ignores SIGTERM), and
// ProcessReward's refusals of a process that crashes, babbles, or answers too much.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/paths.h"
#include "config/config.h"
#include "reward/process_reward.h"
#include "reward/reward_protocol.h"
#include "reward/reward_setup.h"
#include "runtime/child_process.h"
#include "runtime/error.h"

using namespace hone;
using namespace hone::data;
using namespace hone::reward;
using hone::ChildProcess;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hone::UserError& e) {
    return e.what();
  }
  return "(no error)";
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

data::Prompt sample_prompt() {
  Prompt p;
  p.text = "What is 2+3?";
  p.messages = {{"system", "Be brief."}, {"user", "What is 2+3?"}};
  p.answer = "5";
  p.id = 17;
  p.extra_json = R"({"difficulty":2,"tags":["add"]})";
  return p;
}

// A shell reward answering every request line with `reply`.
std::string replying(const std::string& reply) { return "while read -r line; do echo '" + reply + "'; done"; }

std::vector<reward::RewardQuery> queries(const data::Prompt& p, const std::vector<std::string>& completions) {
  std::vector<reward::RewardQuery> q;
  for (const auto& c : completions) q.push_back({&p, c, 3, false, 2});
  return q;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reward_process)

BOOST_AUTO_TEST_CASE(request_line_carries_the_rollout_and_the_rows_extra_fields) {
  const data::Prompt p = sample_prompt();
  const std::string completion = "The answer is \\boxed{5}\xff";  // a completion cut mid-character
  reward::RewardQuery q{&p, completion, 9, true, 4};
  const std::string line = reward::reward_request_line(q, 1, 8);
  BOOST_TEST(line.back() == '\n');
  BOOST_TEST(std::count(line.begin(), line.end(), '\n') == 1);
  const auto j = nlohmann::json::parse(line);
  BOOST_TEST(j["prompt"] == "What is 2+3?");
  BOOST_TEST(j["messages"].size() == 2u);
  BOOST_TEST(j["messages"][0]["role"] == "system");
  BOOST_TEST(j["completion"] == "The answer is \\boxed{5}\xef\xbf\xbd");  // U+FFFD for the bad byte
  BOOST_TEST(j["answer"] == "5");
  BOOST_TEST(j["extra"]["difficulty"] == 2);
  BOOST_TEST(j["extra"]["tags"][0] == "add");
  BOOST_TEST(j["id"] == 17);
  BOOST_TEST(j["step"] == 4);
  BOOST_TEST(j["completion_tokens"] == 9);
  BOOST_TEST(j["finish_reason"] == "length");
  BOOST_TEST(j["batch_index"] == 1);
  BOOST_TEST(j["batch_size"] == 8);
  data::Prompt plain;
  plain.text = "rev:7=";
  const auto k = nlohmann::json::parse(reward::reward_request_line({&plain, "7", 1, false, 1}, 0, 1));
  BOOST_TEST(k["messages"][0]["content"] == "rev:7=");
  BOOST_TEST(k["extra"].is_object());
  BOOST_TEST(k["finish_reason"] == "stop");
}

BOOST_AUTO_TEST_CASE(replies_are_a_number_or_an_object_with_sub_scores) {
  reward::RewardResult r = parse_reward_reply("0.5");
  BOOST_TEST(r.reward == 0.5);
  BOOST_TEST(r.correct);  // no "correct": a reward > 0 counts as correct
  BOOST_TEST(!reward::parse_reward_reply(" 0 ").correct);
  r = reward::parse_reward_reply(R"({"reward": -1, "correct": true, "format": 1, "length_penalty": -0.25, "ok": false})");
  BOOST_TEST(r.reward == -1.0);
  BOOST_TEST(r.correct);
  BOOST_REQUIRE(r.scores.size() == 3u);
  BOOST_TEST(r.scores[0].name == "format");
  BOOST_TEST(r.scores[1].name == "length_penalty");
  BOOST_TEST(r.scores[1].value == -0.25);
  BOOST_TEST(r.scores[2].name == "ok");
  BOOST_TEST(r.scores[2].value == 0.0);
  BOOST_TEST(!reward::parse_reward_reply(R"({"reward": 1, "correct": false})").correct);

  auto bad = [](const std::string& line) { return error_of([&] { reward::parse_reward_reply(line); }); };
  BOOST_TEST(contains(bad("hello"), "not JSON"));
  BOOST_TEST(contains(bad(""), "not JSON"));
  BOOST_TEST(contains(bad("[1]"), "a list"));
  BOOST_TEST(contains(bad(R"({"score": 1})"), "no \"reward\""));
  BOOST_TEST(contains(bad(R"({"reward": "1"})"), "must be a number, got a string"));
  BOOST_TEST(contains(bad("1e999"), "not JSON"));  // out of a double's range
  BOOST_TEST(contains(bad(R"({"reward": 1, "correct": 1})"), "true or false"));
  BOOST_TEST(contains(bad(R"({"reward": 1, "a/b": 1})"), "sub-score name \"a/b\""));
  BOOST_TEST(contains(bad(R"({"reward": 1, "why": "because"})"), "sub-score \"why\" must be a number"));
  // Finite as a double but beyond fp32, where rewards are trained on: refused, not an internal check later.
  BOOST_TEST(contains(bad("1e39"), "the reward is 1e+39, beyond the range of a 32-bit float"));
  BOOST_TEST(contains(bad(R"({"reward": -1.7e308})"), "\"reward\" is -1.7e+308, beyond the range of a 32-bit float"));
  BOOST_TEST(reward::parse_reward_reply("3.4e38").reward == 3.4e38);
  // A reply nested 100,000 levels deep is refused before it is parsed; a NUL byte in a name is shown, not an end.
  BOOST_TEST(contains(bad(std::string(100000, '[') + std::string(100000, ']')), "nested deeper than 256 levels"));
  BOOST_TEST(contains(bad(R"({"reward": 1, "a\u0000b": 1})"), "sub-score name \"a\\x00b\" is not"));
}

BOOST_AUTO_TEST_CASE(child_exchanges_lines_without_deadlock_on_full_pipes) {
  ChildProcess cat("cat", {});
  // 4 MB each way: far more than a pipe holds, so hone must read the replies while it writes.
  std::string data;
  const std::string line(999, 'x');
  for (int i = 0; i < 4000; ++i) data += line + "\n";
  ChildProcess::Exchange x = cat.exchange(data, 4000, 30.0);
  BOOST_TEST(int(x.status) == int(ChildProcess::Status::ok));
  BOOST_TEST(x.lines.size() == 4000u);
  BOOST_TEST(x.lines.back() == line);
  BOOST_TEST(!cat.pending_output());
  x = cat.exchange("a\r\nb\nc\n", 2, 10.0);  // CRLF replies are fine; the third line stays buffered
  BOOST_TEST(x.lines == std::vector<std::string>({"a", "b"}));
  BOOST_TEST(cat.pending_output());
  BOOST_TEST(cat.pending_line() == "c");
}

// A 15 MiB reply line arrives in some 240 reads of 64 KiB: each byte is searched for the line end once (the search
// started again at the line's beginning after every read: some 1.8 GB of searching), and many short lines in one
// read are taken without moving the rest of the buffer for each.
BOOST_AUTO_TEST_CASE(long_and_many_reply_lines_are_searched_once) {
  ChildProcess cat("cat", {});
  const std::string line(size_t(15) << 20, 'x');
  ChildProcess::Exchange x = cat.exchange(line + "\n", 1, 120.0);
  BOOST_TEST(int(x.status) == int(ChildProcess::Status::ok));
  BOOST_TEST(x.lines.size() == 1u);
  BOOST_TEST(x.lines[0].size() == line.size());
  BOOST_TEST(cat.bytes_searched() == line.size() + 1);
  std::string many;
  for (int i = 0; i < 100000; ++i) many += "1\n";
  x = cat.exchange(many, 100000, 120.0);
  BOOST_TEST(x.lines.size() == 100000u);
  BOOST_TEST(cat.bytes_searched() == line.size() + 1 + many.size());
}

BOOST_AUTO_TEST_CASE(child_timeouts_exits_and_stderr) {
  {
    ChildProcess slow("sleep 30", {});
    const auto t0 = std::chrono::steady_clock::now();
    const auto x = slow.exchange("hi\n", 1, 0.3);
    BOOST_TEST(int(x.status) == int(ChildProcess::Status::timeout));
    BOOST_TEST(seconds_since(t0) < 5.0);
  }
  {
    ChildProcess dies("read -r l; echo partial; for i in $(seq 1 50); do echo \"err $i\" >&2; done; exit 3", {});
    const auto x = dies.exchange("hi\n", 2, 10.0);
    BOOST_TEST(int(x.status) == int(ChildProcess::Status::closed));
    BOOST_TEST(x.lines == std::vector<std::string>({"partial"}));
    BOOST_TEST(dies.exit_description() == "exited with status 3");
    const std::string tail = dies.stderr_tail(3);
    BOOST_TEST(tail == "  | err 48\n  | err 49\n  | err 50");
  }
  {
    ChildProcess crash("kill -SEGV $$", {});
    const auto x = crash.exchange("", 1, 10.0);
    BOOST_TEST(int(x.status) == int(ChildProcess::Status::closed));
    BOOST_TEST(contains(crash.exit_description(), "killed by signal 11"));
  }
  {
    // A timeout beyond what the clock can count (1e10 s overflows its nanoseconds) is a long wait, not none.
    for (double t : {9.3e9, 1e10, 1e300}) {
      ChildProcess echo("read -r l; echo \"$l\"", {});
      const auto x = echo.exchange("hi\n", 1, t);
      BOOST_TEST(int(x.status) == int(ChildProcess::Status::ok), t);
      BOOST_TEST(x.lines == std::vector<std::string>({"hi"}));
    }
  }
  {
    ChildProcess env("echo \"$HONE_TEST_VAR\"", {{"HONE_TEST_VAR", "seen"}});
    BOOST_TEST(env.exchange("", 1, 10.0).lines == std::vector<std::string>({"seen"}));
  }
  {
    ChildProcess endless("printf 'aaaaaaaaaaaaaaaaaaaaaaaa'; sleep 30", {}, 16);
    BOOST_TEST(int(endless.exchange("", 1, 10.0).status) == int(ChildProcess::Status::line_too_long));
  }
}

BOOST_AUTO_TEST_CASE(a_child_that_ignores_sigterm_and_stdin_is_still_ended) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    ChildProcess stubborn("trap '' TERM; sleep 60 & wait", {});
    BOOST_TEST(stubborn.exchange("", 0, 1.0).lines.empty());
  }  // closes stdin, waits a few seconds, kills the group
  BOOST_TEST(seconds_since(t0) < 10.0);
}

// Whether a process is gone (ended or a zombie whose parent is gone), waiting up to 10 s.
bool process_ends(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!stat || !std::getline(stat, line)) return true;
    const size_t paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

pid_t pid_in(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    long pid = 0;
    if (in >> pid && pid > 0) return pid_t(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

// doc/data-and-rewards.md: the reward program's process group is ended with it, so its background children do
// not outlive it; and it does not outlive hone (a parent-death signal), even when hone is killed with SIGKILL.
BOOST_AUTO_TEST_CASE(the_process_group_ends_with_the_child_and_the_child_with_hone) {
  const std::string dir = test::temp_dir("child-group");
  {
    ChildProcess c("sleep 1000 & echo $! > " + dir + "/bg; while read -r l; do echo 1; done", {});
    BOOST_TEST(c.exchange("x\n", 1, 10.0).lines.size() == 1u);
  }  // end of input: the shell exits, its group with it
  const pid_t bg = pid_in(dir + "/bg");
  BOOST_REQUIRE(bg > 0);
  BOOST_TEST(process_ends(bg));

  // A stand-in for hone, killed with SIGKILL while its child ignores the end of its input.
  const pid_t hone = ::fork();
  if (hone == 0) {
    ChildProcess c("echo $$ > " + dir + "/child; exec sleep 1000", {});
    std::this_thread::sleep_for(std::chrono::seconds(30));
    ::_exit(0);
  }
  const pid_t child = pid_in(dir + "/child");
  ::kill(hone, SIGKILL);
  int status = 0;
  ::waitpid(hone, &status, 0);
  BOOST_REQUIRE(child > 0);
  BOOST_TEST(process_ends(child));
}

BOOST_AUTO_TEST_CASE(process_reward_scores_batches) {
  const data::Prompt p = sample_prompt();
  reward::ProcessReward r(replying(R"({"reward": 0.5, "correct": false, "fmt": 1})"), 10.0, 0);
  BOOST_TEST(r.name() == "reward.command `" + replying(R"({"reward": 0.5, "correct": false, "fmt": 1})") + "`");
  for (int batch = 0; batch < 3; ++batch) {
    const auto res = r.score(queries(p, {"a", "b", "c"}));
    BOOST_REQUIRE(res.size() == 3u);
    BOOST_TEST(res[2].reward == 0.5);
    BOOST_TEST(!res[2].correct);
    BOOST_REQUIRE(res[2].scores.size() == 1u);
    BOOST_TEST(res[2].scores[0].name == "fmt");
  }
  BOOST_TEST(r.score({}).empty());
  // In batches of two: four exchanges for seven queries, results in order (the reply echoes batch_index).
  reward::ProcessReward echo(
      "while read -r line; do i=$(echo \"$line\" | sed 's/.*\"batch_index\":\\([0-9]*\\).*/\\1/'); echo $i; done",
      10.0, 0);
  const auto res = reward::score_in_batches(echo, queries(p, {"1", "2", "3", "4", "5", "6", "7"}), 2);
  std::vector<double> got;
  for (const auto& x : res) got.push_back(x.reward);
  BOOST_TEST(got == std::vector<double>({0, 1, 0, 1, 0, 1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(process_reward_failures_name_the_process_the_line_and_the_stderr) {
  const data::Prompt p = sample_prompt();
  auto fails = [&](const std::string& command, double timeout = 10.0) {
    return error_of([&] {
      reward::ProcessReward r(command, timeout, 3);
      r.score(queries(p, {"x", "y"}));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // what the process writes after a batch is there
      r.score(queries(p, {"x", "y"}));
    });
  };
  std::string e = fails("read -r l; echo 'Traceback ...' >&2; echo 'ValueError: bad' >&2; exit 1");
  BOOST_TEST(contains(e, "on rank 3"));
  BOOST_TEST(contains(e, "0 of 2 replies"));
  BOOST_TEST(contains(e, "exited with status 1"));
  BOOST_TEST(contains(e, "  | Traceback ...\n  | ValueError: bad"));
  e = fails(replying("debug: starting"));
  BOOST_TEST(contains(e, "reply 1 of 2 (step 2) is not a reward: 'debug: starting': it is not JSON"));
  BOOST_TEST(contains(e, "wrote nothing to stderr"));
  // Three replies to two requests: seen after the batch, or at the latest before the next one.
  e = fails("read -r a; read -r b; echo 1; echo 1; echo 1; " + replying("1"));
  BOOST_TEST((contains(e, "more reply lines than the 2 requests") || contains(e, "a line nobody asked for")), e);
  // A line before any request: seen before the first batch, or (when the child is slow to start) taken as the
  // first reply, so that one reply too many is left after the batch or before the next one.
  e = fails("echo 1; " + replying("1"));
  BOOST_TEST((contains(e, "a line nobody asked for") || contains(e, "more reply lines than the 2 requests")), e);
  const auto t0 = std::chrono::steady_clock::now();
  e = fails("read -r l; echo 1; sleep 30", 0.5);
  BOOST_TEST(contains(e, "no complete answer within reward.timeout_s = 0.5 s (1 of 2 replies"));
  BOOST_TEST(seconds_since(t0) < 10.0);
  // A reply may introduce sub-score names up to the limit of a plug-in's, over the whole run.
  e = error_of([&] {
    reward::ProcessReward r("i=0; while read -r l; do i=$((i+1)); echo \"{\\\"reward\\\": 1, \\\"s$i\\\": 1}\"; done", 10.0, 0);
    r.score(queries(p, std::vector<std::string>(1000, "x")));
    r.score(queries(p, std::vector<std::string>(100, "x")));
  });
  BOOST_TEST(contains(e, "reply 25 of 100 (step 2)"), e);
  BOOST_TEST(contains(e, "its sub-score \"s1025\" would be name 1025 of the run; a reward gives at most 1024"), e);
  e = fails("/nonexistent/reward.py");
  BOOST_TEST(contains(e, "exited with status 127"));
  BOOST_TEST(contains(e, "not found"));
}

BOOST_AUTO_TEST_CASE(math_checker_options_come_from_the_deck) {
  const hone::Config c = hone::load_config_from_string(
      "[model]\npath = \"m\"\n[data]\npath = \"x.jsonl\"\n[reward]\nformat = \"any\"\nformat_reward = 0.1\nfallback_last_number = false\n"
      "relative_tolerance = 1e-3\n",
      "deck.toml", {});
  const reward::MathRewardOptions m = math_reward_options(c);
  BOOST_TEST(int(m.format) == int(reward::AnswerFormat::any));
  BOOST_TEST(m.format_reward == 0.1);
  BOOST_TEST(!m.check.fallback_last_number);
  BOOST_TEST(m.check.relative_tolerance == 1e-3);
  // They act: with format_reward and "any", an answer phrase earns the bonus; a wrong answer only the bonus.
  reward::MathReward r(m);
  BOOST_TEST(r.score("The answer is 5.", "5").reward == 1.1);
  BOOST_TEST(r.score("The answer is 6.", "5").reward == 0.1);
  BOOST_TEST(r.score("5", "5").reward == 0.0);  // no format, no last-number fallback: no answer at all
  BOOST_TEST(r.score("1.0005", "1").reward == 0.0);
  BOOST_TEST(r.score("the answer is 1.0005", "1.0").reward == 1.1);  // within 1e-3 of a real
}

BOOST_AUTO_TEST_SUITE_END()
