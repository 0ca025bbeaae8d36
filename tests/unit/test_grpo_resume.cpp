// Checkpoints and resume of `hone run`: an interrupted-and-resumed run reproduces the uninterrupted one bitwise;
// SIGTERM finishes the step, checkpoints and exits 3; SIGKILL at any moment leaves a readable output file and no
// half checkpoint that resume would pick, and resume after it works.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <random>

#include "io/checkpoint.h"
#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {

// Starts `hone run`, waits `delay` seconds after the output file appears, sends `signal`, returns the exit status
// (the shell's 128 + signal for a kill) and the output.
int run_and_signal(const std::string& deck, const std::string& dir, const std::string& args, double delay,
                   const std::string& signal, std::string* out) {
  char cmd[4096];
  std::snprintf(cmd, sizeof cmd,
                "sh -c '%s run %s %s > %s/log 2>&1 & p=$!; i=0; while [ ! -f %s/out/t.h5 ] && [ $i -lt 400 ]; do "
                "sleep 0.01; i=$((i+1)); done; sleep %.3f; kill -%s $p; wait $p; echo rc=$?'",
                test::hone_exe().c_str(), deck.c_str(), args.c_str(), dir.c_str(), dir.c_str(), delay, signal.c_str());
  std::string shell_out;
  test::run_command(cmd, &shell_out);
  *out = file_bytes(dir + "/log");
  const size_t at = shell_out.find("rc=");
  return at == std::string::npos ? -1 : std::stoi(shell_out.substr(at + 3));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_resume)

BOOST_AUTO_TEST_CASE(interrupted_and_resumed_run_is_bitwise_identical) {
  const std::string a = test::temp_dir("grpo-resume-a"), b = test::temp_dir("grpo-resume-b");
  // Several optimizer steps per GRPO step and the logprob phase: the optimizer moments and step count matter.
  const std::string args = "train.global_batch_size=8 run.max_steps=4";
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(a), args), 0);
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(b), args + " run.max_steps=2"), 0);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(write_deck(b), args + " run.resume=auto", &out), 0);
  BOOST_TEST(out.find("resuming from") != std::string::npos);
  const std::string ha = a + "/out/t.h5", hb = b + "/out/t.h5";
  BOOST_TEST(steps(hb) == (std::vector<int64_t>{1, 2, 3, 4}));
  for (const auto& m : deterministic_metrics()) {
    BOOST_TEST_INFO(m);
    const auto va = metric(ha, m), vb = metric(hb, m);
    BOOST_REQUIRE_EQUAL(va.size(), 4u);
    BOOST_REQUIRE_EQUAL(vb.size(), 4u);
    for (size_t i = 0; i < 4; ++i)
      BOOST_TEST((va[i] == vb[i] || (std::isnan(va[i]) && std::isnan(vb[i]))), m << " step " << i + 1);
  }
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "state.json"}) {
    BOOST_TEST_INFO(f);
    const std::string fa = file_bytes(a + "/ck/step_00000004/" + f), fb = file_bytes(b + "/ck/step_00000004/" + f);
    BOOST_TEST(!fa.empty());
    BOOST_TEST((fa == fb));
  }
}

BOOST_AUTO_TEST_CASE(sigterm_finishes_the_step_checkpoints_and_exits_3) {
  const std::string dir = test::temp_dir("grpo-sigterm");
  const std::string deck = write_deck(dir);
  std::string out;
  const int rc = run_and_signal(deck, dir, "run.max_steps=100000", 0.5, "TERM", &out);
  BOOST_TEST_INFO(out.substr(out.size() > 800 ? out.size() - 800 : 0));
  BOOST_REQUIRE_EQUAL(rc, 3);
  BOOST_TEST(out.find("stopped by SIGTERM") != std::string::npos);
  const auto st = steps(dir + "/out/t.h5");
  BOOST_REQUIRE(!st.empty());
  const auto ck = hone::latest_complete_checkpoint(dir + "/ck");
  BOOST_REQUIRE(ck.has_value());
  BOOST_TEST(ck->step == st.back());  // the step that was running finished and was checkpointed
  // Resume continues the same file.
  const int64_t k = st.back();
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.resume=auto run.max_steps=" + std::to_string(k + 2)), 0);
  const auto st2 = steps(dir + "/out/t.h5");
  BOOST_REQUIRE_EQUAL(st2.size(), size_t(k + 2));
  for (size_t i = 0; i < st2.size(); ++i) BOOST_TEST(st2[i] == int64_t(i + 1));
}

BOOST_AUTO_TEST_CASE(sigkill_at_random_moments_never_leaves_a_broken_file_or_checkpoint) {
  std::mt19937 rng(20261122);
  std::uniform_real_distribution<double> delay(0.0, 0.8);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string dir = test::temp_dir("grpo-sigkill-" + std::to_string(attempt));
    const std::string deck = write_deck(dir);
    std::string out;
    const double d = delay(rng);
    const int rc = run_and_signal(deck, dir, "run.max_steps=100000 checkpoint.every=1 checkpoint.keep=2", d, "KILL", &out);
    BOOST_TEST_INFO("attempt " << attempt << " delay " << d);
    BOOST_TEST(rc == 128 + 9);
    // The output file opens and its steps are 1..n.
    test_h5::File f(dir + "/out/t.h5");
    BOOST_REQUIRE(f.id >= 0);
    const auto st = steps(dir + "/out/t.h5");
    for (size_t i = 0; i < st.size(); ++i) BOOST_TEST(st[i] == int64_t(i + 1));
    // Every checkpoint resume could pick is whole (hashes checked).
    int64_t k = 0;
    for (const auto& c : hone::complete_checkpoints(dir + "/ck")) {
      BOOST_TEST(hone::verify_checkpoint(c.path, true) == "");
      k = c.step;
    }
    BOOST_TEST_MESSAGE("SIGKILL after " << d << " s: " << st.size() << " rows, newest complete checkpoint step " << k);
    // Resume continues from the newest complete checkpoint; the file holds each step once.
    BOOST_REQUIRE_EQUAL(hone_run(deck, "run.resume=auto checkpoint.every=1 run.max_steps=" + std::to_string(k + 2), &out), 0);
    const auto st2 = steps(dir + "/out/t.h5");
    BOOST_REQUIRE_EQUAL(st2.size(), size_t(k + 2));
    for (size_t i = 0; i < st2.size(); ++i) BOOST_TEST(st2[i] == int64_t(i + 1));
  }
}

// output.overwrite replaces the output file only: a plain rerun beside an interrupted run's checkpoints is refused
// and deletes nothing; checkpoint.overwrite = true deletes them, saying which.
BOOST_AUTO_TEST_CASE(output_overwrite_never_deletes_checkpoints) {
  const std::string dir = test::temp_dir("grpo-overwrite");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=2", &out), 0);
  BOOST_REQUIRE(fs::exists(dir + "/ck/step_00000002"));
  BOOST_TEST(hone_run(deck, "run.max_steps=2 output.overwrite=true", &out) == 2, out);
  BOOST_TEST(out.find("checkpoint.dir '" + dir + "/ck' already holds checkpoints (run 't', newest step 2): set "
                      "run.resume=auto to continue from them, checkpoint.overwrite=true to delete them") !=
                 std::string::npos, out);
  BOOST_TEST(fs::exists(dir + "/ck/step_00000002"));
  BOOST_TEST(hone_run(deck, "run.max_steps=1 output.overwrite=true checkpoint.overwrite=true", &out) == 0, out);
  BOOST_TEST(out.find("checkpoint.overwrite = true: deleting 1 checkpoint in checkpoint.dir '" + dir +
                      "/ck' (run 't', steps 2)") != std::string::npos, out);
  BOOST_TEST(!fs::exists(dir + "/ck/step_00000002"));
  BOOST_TEST(fs::exists(dir + "/ck/step_00000001"));
}

// Resuming a run that has already run its run.max_steps runs nothing and says so plainly (exit 0).
BOOST_AUTO_TEST_CASE(resuming_past_max_steps_says_so) {
  const std::string dir = test::temp_dir("grpo-past-max");
  const std::string deck = write_deck(dir);
  std::string out;
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=3", &out), 0);
  BOOST_TEST(hone_run(deck, "run.max_steps=2 run.resume=auto", &out) == 0, out);
  BOOST_TEST(out.find("hone: nothing to run: the checkpoint resumed from (" + dir +
                      "/ck/step_00000003) is at step 3, past run.max_steps = 2; raise run.max_steps to train further") !=
                 std::string::npos, out);
  BOOST_TEST(out.find("done: ") == std::string::npos, out);
  BOOST_TEST(hone_run(deck, "run.max_steps=3 run.resume=auto", &out) == 0, out);
  BOOST_TEST(out.find("is at step 3, which is run.max_steps = 3") != std::string::npos, out);
  BOOST_TEST(steps(dir + "/out/t.h5") == (std::vector<int64_t>{1, 2, 3}));
}

BOOST_AUTO_TEST_SUITE_END()
