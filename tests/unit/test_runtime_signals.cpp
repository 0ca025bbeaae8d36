// Stop signals: SIGUSR1/SIGTERM set the flag the GRPO loop polls; a second one ends the process
// (tests/programs/stop_signal).
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <string>

#include "common/paths.h"
#include "test_grpo_util.h"

namespace {
std::string program() { return test::build_dir() + "/tests/programs/stop_signal"; }
const std::string kMpirun = "timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root ";
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

// Ctrl-C is a graceful stop like SIGTERM (a checkpoint, exit 3); a second Ctrl-C ends the process at once.
BOOST_AUTO_TEST_CASE(sigint_stops_gracefully_and_a_second_one_ends_the_process) {
  std::string out;
  BOOST_TEST(test::run_command(program() + " int", &out) == 3);
  BOOST_TEST(out.find("rank 0 after: 1 signal " + std::to_string(SIGINT) + " any rank: 1") != std::string::npos);
  // The first Ctrl-C says what happens next, once.
  const std::string notice = "hone: SIGINT received: finishing the step in progress, then a checkpoint and exit code 3 "
                             "(run.resume=auto continues); Ctrl-C again stops at once, without a checkpoint\n";
  BOOST_TEST(out.find(notice) != std::string::npos, out);
  BOOST_TEST(out.find(notice) == out.rfind(notice), out);
  out.clear();
  BOOST_TEST(test::run_command(program() + " int2", &out) == 128 + SIGINT);
  BOOST_TEST(out.find("still running") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_signal_on_one_rank_stops_every_rank) {
  std::string out;
  const int status =
      test::run_command(kMpirun + program() + " rank1", &out);
  BOOST_TEST(status == 3);
  BOOST_TEST(out.find("rank 0 after: 0 signal 0 any rank: 1") != std::string::npos);
  BOOST_TEST(out.find("rank 1 after: 1 signal " + std::to_string(SIGUSR1) + " any rank: 1") != std::string::npos);
}

// A signal sent from outside, to the process alone or to mpirun (which forwards SIGUSR1 to every rank), stops the
// polling loop on every rank with exit code 3.
BOOST_AUTO_TEST_CASE(signal_from_outside_stops_the_loop) {
  const std::string dir = test::temp_dir("stop-signal");
  // No `timeout` in front of mpirun here: it would take the signal itself; it wraps the whole script instead.
  for (const std::string& launcher : {std::string(), std::string("mpirun -np 2 --oversubscribe --allow-run-as-root ")}) {
    BOOST_TEST_CONTEXT(launcher) {
      const std::string log = dir + "/out.txt";
      const std::string script = launcher + program() + " wait > " + log + " 2>&1 & p=$!; " +
                                 "for i in $(seq 300); do grep -q ready " + log + " && break; sleep 0.1; done; " +
                                 "kill -USR1 $p; wait $p; s=$?; cat " + log + "; exit $s";
      std::string out;
      BOOST_TEST(test::run_command("timeout 90 bash -c '" + script + "'", &out) == 3);
      BOOST_TEST(out.find("rank 0 stopping at step") != std::string::npos);
      BOOST_TEST((launcher.empty() || out.find("rank 1 stopping at step") != std::string::npos));
    }
  }
}

// Under mpirun a SIGTERM (Slurm's at the time limit) makes mpirun exit 1 though hone checkpointed and exited 3;
// jobs/hone-mpirun returns hone's 3. The steps are made long enough (tens of milliseconds) that rank 0's step lines
// do not fill the pipe to mpirun: once mpirun has the signal it stops reading the ranks' output and kills them a
// second later (odls_base_sigkill_timeout), so a rank blocked writing a line would never reach its checkpoint. The
// tiny deck's millisecond steps filled it on a fast machine.
BOOST_AUTO_TEST_CASE(exit_code_3_survives_mpirun_through_jobs_hone_mpirun) {
  const std::string dir = test::temp_dir("stop-mpirun");
  const std::string deck = test_grpo::write_deck(dir);
  const std::string log = dir + "/out.txt";
  const std::string slower = " grpo.num_prompts_per_step=64 generation.max_new_tokens=24 "
                             "generation.max_total_sequence_length=40";
  const std::string script = test::source_dir() + "/jobs/hone-mpirun -np 2 --oversubscribe --allow-run-as-root " +
                             test::hone_exe() + " run " + deck + " run.max_steps=100000" + slower + " > " + log +
                             " 2>&1 & p=$!; " +
                             "for i in $(seq 300); do grep -q \"^ *1 \" " + log + " && break; sleep 0.1; done; " +
                             "kill -TERM $p; wait $p; s=$?; cat " + log + "; exit $s";
  std::string out;
  BOOST_TEST(test::run_command("timeout 120 bash -c '" + script + "'", &out) == 3, out);
  BOOST_TEST(out.find("hone: stopped by SIGTERM after step ") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
