// Your own reward in `hone run`: the example Python program (reward.command) and the example C plug-in
// (reward.library) give the built-in reward's runs exactly, their sub-scores become metrics, a JSONL row's extra
// fields reach the program, a failing program ends every rank with its stderr, only the first rank of a
// tensor-parallel group runs it, and both examples drive the demo to learn.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "test_grpo_util.h"

using namespace test_grpo;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
std::string tail(const std::string& s) { return s.substr(s.size() > 2000 ? s.size() - 2000 : 0); }
std::string mpi(int n) { return "timeout 240 mpirun -np " + std::to_string(n) + " --oversubscribe --allow-run-as-root "; }

std::string python_reward() { return "'reward.command=\"python3 " + test::source_dir() + "/examples/reward/exact_match.py\"'"; }
std::string plugin_reward() { return "reward.library=" + test::build_dir() + "/examples/libexact_match_reward.so"; }

// Runs the tiny deck in a fresh folder with `args`; returns the folder.
std::string run_tiny(const std::string& tag, const std::string& args, int ranks = 1) {
  const std::string dir = test::temp_dir(tag);
  std::string out;
  const int rc = hone_run(write_deck(dir), "run.max_steps=3 " + args, &out, ranks > 1 ? mpi(ranks) : "");
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  return dir;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_reward)

BOOST_AUTO_TEST_CASE(the_examples_reproduce_the_builtin_reward_and_add_sub_scores) {
  const std::string builtin = run_tiny("reward-builtin", "");
  const std::string program = run_tiny("reward-program", python_reward());
  const std::string plugin = run_tiny("reward-plugin", plugin_reward());
  const std::string h0 = builtin + "/out/t.h5";
  for (const std::string& d : {program, plugin}) {
    const std::string h = d + "/out/t.h5";
    for (const char* m : {"reward/mean", "reward/max", "accuracy", "advantages/max", "loss", "grad_norm"}) {
      BOOST_TEST_INFO(d << " " << m);
      BOOST_TEST(metric(h, m) == metric(h0, m));
    }
    BOOST_TEST(metric(h, "scores/answered").size() == 3u);
    BOOST_TEST(metric(h, "scores/chars").size() == 3u);
    BOOST_TEST(metric(h, "scores/chars")[0] > 0.0);
  }
  BOOST_TEST(metric(program + "/out/t.h5", "scores/chars") == metric(plugin + "/out/t.h5", "scores/chars"));
  BOOST_TEST(metric(h0, "scores/chars").empty());
  test_h5::File f(program + "/out/t.h5");
  BOOST_TEST(test_h5::string_attr(f.id, "/steps/scores/chars", "unit") == "1");
}

BOOST_AUTO_TEST_CASE(jsonl_fields_reach_the_program) {
  const std::string dir = test::temp_dir("reward-fields");
  {
    std::ofstream data(dir + "/data.jsonl");
    for (int i = 0; i < 6; ++i)
      data << "{\"prompt\": \"p" << i << "\", \"answer\": \"a" << i << "\", \"expect\": \"a" << i
           << "\", \"copy\": \"p" << i << "\", \"weight\": 0.25, \"nested\": {\"k\": [1, 2]}}\n";
    std::ofstream(dir + "/judge.py")
        << "import json, sys\n"
           "for line in sys.stdin:\n"
           "    r = json.loads(line)\n"
           "    x = r['extra']\n"
           "    ok = (r['answer'] == x['expect'] and r['prompt'] == x['copy'] and r['messages'][-1]['content'] == "
           "r['prompt']\n"
           "          and x['nested']['k'] == [1, 2] and 'weight' in x and 'prompt' not in x and 'answer' not in x\n"
           "          and r['step'] >= 1 and r['completion_tokens'] >= 1 and r['finish_reason'] in ('stop', 'length')\n"
           "          and 0 <= r['batch_index'] < r['batch_size'])\n"
           "    print(json.dumps({'reward': x['weight'] if ok else -1.0, 'correct': ok, 'w2': 2 * x['weight']}))\n";
  }
  std::string out;
  const int rc = hone_run(write_deck(dir), "run.max_steps=2 data.task=jsonl data.path=" + dir +
                                               "/data.jsonl 'reward.command=\"python3 " + dir + "/judge.py\"'",
                          &out);
  BOOST_TEST_INFO(tail(out));
  BOOST_REQUIRE_EQUAL(rc, 0);
  const std::string h = dir + "/out/t.h5";
  BOOST_TEST(metric(h, "reward/mean") == std::vector<double>({0.25, 0.25}));
  BOOST_TEST(metric(h, "reward/min") == std::vector<double>({0.25, 0.25}));
  BOOST_TEST(metric(h, "accuracy") == std::vector<double>({1.0, 1.0}));
  BOOST_TEST(metric(h, "scores/w2") == std::vector<double>({0.5, 0.5}));
}

BOOST_AUTO_TEST_CASE(a_failing_program_ends_the_run_with_its_stderr) {
  const std::string dir = test::temp_dir("reward-crash");
  std::ofstream(dir + "/crash.py") << "import sys\nsys.stdin.readline()\nraise ValueError('cannot score this')\n";
  std::string out;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = hone_run(write_deck(dir), "'reward.command=\"python3 " + dir + "/crash.py\"'", &out);
  BOOST_TEST_INFO(tail(out));
  BOOST_TEST(rc == 2);
  BOOST_TEST(contains(out, "hone: error: reward.command `python3 " + dir + "/crash.py` on rank 0: it closed its stdout"));
  BOOST_TEST(contains(out, "exited with status 1"));
  BOOST_TEST(contains(out, "  | ValueError: cannot score this\n"));
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 60.0);
  // The deck refuses both rewards at once, and the math checker's keys where the math checker does not score.
  BOOST_TEST(hone_run(write_deck(dir), python_reward() + " " + plugin_reward(), &out) == 2);
  BOOST_TEST(contains(out, "conflicting keys 'reward.command'"));
  BOOST_TEST(hone_run(write_deck(dir), "reward.format_reward=0.1", &out) == 2);
  BOOST_TEST(contains(out, "a synthetic task is scored by its own checker"));
  // hone check looks for the plug-in's file (it loads nothing) and names the reward.
  BOOST_TEST(test::run_command(test::hone_exe() + " check " + write_deck(dir) + " reward.library=" + dir + "/no.so",
                               &out) == 2);
  BOOST_TEST(contains(out, "reward.library = \"" + dir + "/no.so\": no such file"));
  BOOST_TEST(test::run_command(test::hone_exe() + " check " + write_deck(dir) + " output.overwrite=true checkpoint.overwrite=true " + plugin_reward(),
                               &out) == 0);
  BOOST_TEST(contains(out, "reward      plug-in " + test::build_dir() + "/examples/libexact_match_reward.so"));
}

BOOST_AUTO_TEST_CASE(a_program_failing_on_one_rank_ends_every_rank) {
  const std::string dir = test::temp_dir("reward-rank1");
  std::ofstream(dir + "/r.sh") << "if [ \"$HONE_RANK\" = 1 ]; then echo 'rank one gives up' >&2; exit 4; fi\n"
                                  "while read -r line; do echo 0.5; done\n";
  std::string out;
  const int rc = hone_run(write_deck(dir), "'reward.command=\"sh " + dir + "/r.sh\"'", &out, mpi(2));
  BOOST_TEST_INFO(tail(out));
  BOOST_TEST(rc == 2);
  BOOST_TEST(contains(out, "on rank 1: it closed its stdout"));
  BOOST_TEST(contains(out, "exited with status 4"));
  BOOST_TEST(contains(out, "  | rank one gives up"));
}

BOOST_AUTO_TEST_CASE(a_tensor_parallel_group_scores_once) {
  // Each process leaves a file named after its rank; under tp = 2 only rank 0 (the group's first) runs the program,
  // and the run matches one rank's.
  const std::string marks = test::temp_dir("reward-tp-marks");
  const std::string cmd = "'reward.command=\"touch " + marks + "/rank$HONE_RANK; exec python3 " + test::source_dir() +
                          "/examples/reward/exact_match.py\"'";
  const std::string one = run_tiny("reward-tp1", cmd);
  BOOST_TEST(fs::exists(marks + "/rank0"));
  fs::remove(marks + "/rank0");
  const std::string two = run_tiny("reward-tp2", cmd + " parallel.tp=2", 2);
  BOOST_TEST(fs::exists(marks + "/rank0"));
  BOOST_TEST(!fs::exists(marks + "/rank1"));
  for (const char* m : {"reward/mean", "accuracy", "scores/chars"})
    BOOST_TEST(metric(one + "/out/t.h5", m) == metric(two + "/out/t.h5", m));
}

// The proof: the demo learns with the example program and with the example plug-in (both runs at once:
// they are the built-in demo's runs exactly, so the same curve, and the 2-core CI machine runs them side by side).
BOOST_AUTO_TEST_CASE(the_demo_learns_with_the_example_program_and_plugin) {
  const std::string dir = test::temp_dir("reward-demo");
  const std::string run = test::hone_exe() + " run " + test::source_dir() + "/input/demo.toml ";
  std::string out;
  const int rc = test::run_command(
      "(" + run + "output.dir=" + dir + "/py checkpoint.dir=" + dir + "/py/ck " + python_reward() + " > " + dir +
          "/py.log 2>&1; echo $? > " + dir + "/py.rc) & (" + run + "output.dir=" + dir + "/c checkpoint.dir=" + dir +
          "/c/ck " + plugin_reward() + " > " + dir + "/c.log 2>&1; echo $? > " + dir + "/c.rc) & wait; cat " + dir +
          "/py.rc " + dir + "/c.rc",
      &out);
  BOOST_REQUIRE_EQUAL(rc, 0);
  BOOST_TEST_INFO(tail(file_bytes(dir + "/py.log")) << tail(file_bytes(dir + "/c.log")));
  BOOST_REQUIRE(out == "0\n0\n");
  const auto py = metric(dir + "/py/demo.h5", "reward/mean");
  const auto c = metric(dir + "/c/demo.h5", "reward/mean");
  BOOST_REQUIRE_EQUAL(py.size(), 80u);
  BOOST_TEST(py == c);
  const double early = std::accumulate(py.begin(), py.begin() + 5, 0.0) / 5;
  const double late = std::accumulate(py.end() - 10, py.end(), 0.0) / 10;
  BOOST_TEST_MESSAGE("demo with reward.command and reward.library: first 5 steps " << early << ", last 10 " << late);
  BOOST_TEST(early < 0.2);
  BOOST_TEST(late > 0.7);
  BOOST_TEST(metric(dir + "/c/demo.h5", "scores/answered").back() > 0.9);
}

BOOST_AUTO_TEST_SUITE_END()
