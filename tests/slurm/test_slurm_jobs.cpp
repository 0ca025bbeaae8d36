// The job scripts in jobs/ submitted to a real Slurm (the suite's private cluster): the CPU demo deck as a 2-task
// job through each script, checked in its HDF5 file; and a run stopped by SIGUSR1 to the batch shell, which
// checkpoints, exits 3, requeues itself and finishes with every step exactly once.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/paths.h"
#include "slurm/slurm_cluster.h"
#include "unit/test_step_output_util.h"

namespace fs = std::filesystem;
using test_slurm::available;
using test_slurm::slurm_command;

namespace {

std::string file_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `sbatch` for the CPU demo deck as 2 tasks of one CPU each, from `dir` (the job's submit folder); `env` adds
// variables (NAME=value ...); --wait runs under a time limit so that a stuck job cannot hang the suite.
std::string sbatch_line(const std::string& dir, const std::string& script, const std::string& sbatch_args,
                        const std::string& overrides, const std::string& env = "") {
  const bool waits = sbatch_args.find("--wait") != std::string::npos;
  return "cd " + dir + " && env HONE_BIN=" + test::hone_exe() + " " + env + (waits ? " timeout 150" : "") +
         " sbatch --parsable " + sbatch_args + " --gpus-per-node=0 --ntasks-per-node=2 --cpus-per-task=1 --time=10 " +
         test::source_dir() + "/jobs/" + script + " " + test::source_dir() + "/input/demo.toml " + overrides;
}

// The job id from sbatch --parsable's output (its last line: "<id>" or "<id>;<cluster>").
std::string job_id(const std::string& out) {
  std::istringstream in(out);
  std::string line, id;
  while (std::getline(in, line))
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0]))) id = line.substr(0, line.find(';'));
  return id;
}

std::string job_field(const std::string& id, const std::string& field) {
  std::string out;
  slurm_command("scontrol show job " + id, &out);
  const size_t at = out.find(field + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + field.size() + 1;
  return out.substr(from, out.find_first_of(" \n", from) - from);
}

struct Steps {
  std::vector<int64_t> step;
  std::vector<double> reward_mean;
  std::string resume_history;
  int64_t ranks = -1;
};

Steps read_steps(const std::string& h5) {
  Steps s;
  test_h5::File f(h5);
  if (f.id < 0) return s;
  if (test_h5::link_exists(f.id, "/steps/step")) s.step = test_h5::int64s(f.id, "/steps/step");
  if (test_h5::link_exists(f.id, "/steps/reward/mean")) s.reward_mean = test_h5::doubles(f.id, "/steps/reward/mean");
  s.resume_history = test_h5::string_attr(f.id, ".", "resume_history");
  if (H5Aexists_by_name(f.id, ".", "num_ranks", H5P_DEFAULT) > 0) s.ranks = test_h5::int_attr(f.id, ".", "num_ranks");
  return s;
}

std::vector<int64_t> one_to(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 1; i <= n; ++i) v.push_back(i);
  return v;
}

// Submits a script with sbatch --wait and checks the demo's output: steps 1..n, finite rewards, 2 ranks.
void check_demo_job(const std::string& script, const std::string& sbatch_args, int64_t n) {
  BOOST_REQUIRE_MESSAGE(test_slurm::cluster().usable, test_slurm::cluster().start_error);
  const std::string dir = test::temp_dir("slurm-" + script);
  std::string out;
  const int rc =
      slurm_command(sbatch_line(dir, script, "--wait " + sbatch_args, "run.max_steps=" + std::to_string(n)), &out);
  const std::string id = job_id(out);
  const std::string log = file_text(dir + "/hone-" + id + ".out");
  BOOST_TEST_INFO("sbatch: " << out << "\njob log:\n" << log << "\n" << (rc ? test_slurm::daemon_logs() : ""));
  BOOST_TEST(rc == 0);
  BOOST_REQUIRE(!id.empty());
  BOOST_TEST(count_of(log, "hone-job: hone exited with code 0") == 1);
  const std::string run_dir = dir + "/runs/hone-" + id;
  const Steps s = read_steps(run_dir + "/demo.h5");
  BOOST_TEST(s.step == one_to(n), boost::test_tools::per_element());
  BOOST_TEST(s.reward_mean.size() == size_t(n));
  for (double r : s.reward_mean) BOOST_TEST((std::isfinite(r) && r >= 0.0 && r <= 1.0), "reward/mean " << r);
  BOOST_TEST(s.ranks == 2);
  BOOST_TEST(fs::exists(run_dir + "/checkpoints"));
}

bool wait_until(double seconds, const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return done();
}

// Step lines on the job's stdout: "       3  ..." after the header line that starts with "    step".
int step_lines(const std::string& log) {
  int n = 0;
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    if (first >= 1 && first < 8 && line.size() > 8 && std::isdigit(static_cast<unsigned char>(line[first]))) ++n;
  }
  return n;
}

// The step hone stopped after, from its message "stopped by SIG<name> after step <N>"; -1 when absent.
int64_t stopped_after(const std::string& log, const std::string& signal) {
  const std::string what = "stopped by " + signal + " after step ";
  const size_t at = log.find(what);
  return at == std::string::npos ? -1 : std::stoll(log.substr(at + what.size()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(slurm_jobs, *boost::unit_test::precondition(available))

BOOST_AUTO_TEST_CASE(one_node_script_runs_the_demo_as_two_tasks) {
  check_demo_job("hone-1node.sbatch", "", 5);
}

BOOST_AUTO_TEST_CASE(multinode_script_runs_the_demo_as_two_tasks) {
  check_demo_job("hone-multinode.sbatch", "--nodes=1", 3);
}

// scancel -b -s USR1 reaches the batch shell, which forwards it to the srun step: hone finishes its step, writes a
// checkpoint, exits 3; the script requeues the job, which resumes in the same folder and ends with steps 1..N once.
BOOST_AUTO_TEST_CASE(usr1_checkpoints_then_the_requeued_job_resumes) {
  BOOST_REQUIRE_MESSAGE(test_slurm::cluster().usable, test_slurm::cluster().start_error);
  const int64_t n = 120;  // a step of the demo takes about 0.1 s here: the stop lands well before the end
  const std::string dir = test::temp_dir("slurm-requeue");
  std::string out;
  BOOST_REQUIRE_MESSAGE(
      slurm_command(sbatch_line(dir, "hone-1node.sbatch", "", "run.max_steps=" + std::to_string(n)), &out) == 0, out);
  const std::string id = job_id(out);
  BOOST_REQUIRE(!id.empty());
  const std::string log_path = dir + "/hone-" + id + ".out";

  // Signal once hone is in its loop (a few steps done), so the stop lands mid-run.
  const bool started = wait_until(60, [&] { return step_lines(file_text(log_path)) >= 3; });
  BOOST_REQUIRE_MESSAGE(started, "no step lines within 60 s:\n" << file_text(log_path) << test_slurm::daemon_logs());
  BOOST_REQUIRE_MESSAGE(slurm_command("scancel -b -s USR1 " + id, &out) == 0, out);

  const bool finished = wait_until(120, [&] {
    const std::string st = job_field(id, "JobState");
    return st == "COMPLETED" || st == "FAILED" || st == "CANCELLED" || st == "TIMEOUT";
  });
  slurm_command("scontrol show job " + id, &out);
  const std::string log = file_text(log_path);
  BOOST_TEST_INFO("scontrol:\n" << out << "\njob log:\n" << log);
  BOOST_REQUIRE_MESSAGE(finished, "the job did not finish within 120 s\n" << test_slurm::daemon_logs());
  BOOST_TEST(job_field(id, "JobState") == "COMPLETED");
  BOOST_TEST(job_field(id, "ExitCode") == "0:0");
  BOOST_TEST(job_field(id, "Restarts") == "1");

  // The first run: stopped by the forwarded USR1 after a checkpoint, exit code 3, requeued.
  BOOST_TEST(count_of(log, "hone-job: SIGUSR1: asking hone to checkpoint and stop") == 1);
  BOOST_TEST(count_of(log, "stopped by SIGUSR1 after step") == 1);
  BOOST_TEST(count_of(log, "hone-job: hone exited with code 3") == 1);
  BOOST_TEST(count_of(log, "hone-job: requeueing job " + id) == 1);
  // The second: same folder, resumed from that checkpoint, done.
  BOOST_TEST(count_of(log, "hone-job: output: " + dir + "/runs/hone-" + id + "\n") == 2);
  BOOST_TEST(count_of(log, "(restart 1)") == 1);
  BOOST_TEST(count_of(log, "resuming from ") == 1);
  BOOST_TEST(count_of(log, "hone-job: hone exited with code 0") == 1);

  const int64_t stopped = stopped_after(log, "SIGUSR1");
  BOOST_TEST_INFO("stopped after step " << stopped);
  BOOST_TEST((stopped >= 3 && stopped < n));
  char ck[32];
  std::snprintf(ck, sizeof ck, "step_%08lld", static_cast<long long>(stopped));
  // The checkpoint of the stop was written by the first run and is the one the second resumed from.
  const std::string run_dir = dir + "/runs/hone-" + id;
  BOOST_TEST(count_of(log, "checkpoint: " + run_dir + "/checkpoints/" + ck + "\n") == 1);
  BOOST_TEST(count_of(log, "resuming from " + run_dir + "/checkpoints/" + ck + " ") == 1);

  const Steps s = read_steps(run_dir + "/demo.h5");
  BOOST_TEST(s.step == one_to(n), boost::test_tools::per_element());
  BOOST_TEST(s.reward_mean.size() == size_t(n));
  for (double r : s.reward_mean) BOOST_TEST(std::isfinite(r));
  BOOST_TEST(s.resume_history.find("step " + std::to_string(stopped) + " at ") != std::string::npos,
             "resume_history: " << s.resume_history);
}

// scancel (SIGTERM to every task from Slurm, not forwarded again by the script): hone checkpoints and exits 3, the
// job ends cancelled and is not requeued; a new job given the same folder (HONE_RUN_DIR) resumes from the checkpoint.
BOOST_AUTO_TEST_CASE(scancel_checkpoints_and_a_new_job_resumes_with_hone_run_dir) {
  BOOST_REQUIRE_MESSAGE(test_slurm::cluster().usable, test_slurm::cluster().start_error);
  const int64_t n = 8;
  const std::string dir = test::temp_dir("slurm-scancel"), run_dir = dir + "/runs/kept";
  const std::string env = "HONE_RUN_DIR=" + run_dir;
  std::string out;
  BOOST_REQUIRE_MESSAGE(slurm_command(sbatch_line(dir, "hone-1node.sbatch", "", "run.max_steps=1000", env), &out) == 0,
                        out);
  const std::string id = job_id(out);
  BOOST_REQUIRE(!id.empty());
  const std::string log_path = dir + "/hone-" + id + ".out";
  const bool started = wait_until(60, [&] { return step_lines(file_text(log_path)) >= 3; });
  BOOST_REQUIRE_MESSAGE(started, "no step lines within 60 s:\n" << file_text(log_path) << test_slurm::daemon_logs());
  BOOST_REQUIRE_MESSAGE(slurm_command("scancel " + id, &out) == 0, out);
  const bool ended = wait_until(60, [&] { return job_field(id, "JobState") == "CANCELLED" &&
                                                 file_text(log_path).find("hone-job: hone exited") != std::string::npos; });
  const std::string log = file_text(log_path);
  BOOST_TEST_INFO("job log:\n" << log);
  BOOST_REQUIRE(ended);
  BOOST_TEST(count_of(log, "stopped by SIGTERM after step") == 1);
  BOOST_TEST(count_of(log, "hone-job: hone exited with code 3") == 1);
  BOOST_TEST(count_of(log, "requeueing") == 0);
  BOOST_TEST(job_field(id, "Restarts") == "0");
  const int64_t stopped = stopped_after(log, "SIGTERM");
  BOOST_TEST_REQUIRE(stopped >= 3);

  // A new job, the same folder, fewer steps than the first asked for: it resumes and ends at step max(n, stopped).
  const int64_t last = std::max(n, stopped + 2);
  const int rc =
      slurm_command(sbatch_line(dir, "hone-1node.sbatch", "--wait", "run.max_steps=" + std::to_string(last), env), &out);
  const std::string id2 = job_id(out);
  const std::string log2 = file_text(dir + "/hone-" + id2 + ".out");
  BOOST_TEST_INFO("second job log:\n" << log2);
  BOOST_TEST(rc == 0);
  BOOST_TEST(id2 != id);
  BOOST_TEST(count_of(log2, "resuming from " + run_dir + "/checkpoints/step_") == 1);
  const Steps s = read_steps(run_dir + "/demo.h5");
  BOOST_TEST(s.step == one_to(last), boost::test_tools::per_element());
  BOOST_TEST(s.resume_history.find("step " + std::to_string(stopped) + " at ") != std::string::npos,
             "resume_history: " << s.resume_history);
}

BOOST_AUTO_TEST_SUITE_END()
