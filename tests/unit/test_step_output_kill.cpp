// Kill test: tests/programs/output_kill_writer writes output rows and checkpoints in a loop, resuming from its
// newest checkpoint each time it starts; it is killed with SIGKILL at random moments (seeded). After every kill the
// output file must open with consistent datasets and the newest complete checkpoint must be fully written.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/paths.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "unit/test_step_output_util.h"

namespace fs = std::filesystem;

namespace {

std::string writer_exe() { return test::build_dir() + "/tests/programs/output_kill_writer"; }

// Starts the writer; returns its pid.
pid_t start_writer(const std::string& out_dir, const std::string& ckpt_dir, int64_t max_steps) {
  const std::string exe = writer_exe(), steps = std::to_string(max_steps);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0) ::dup2(devnull, 2);
    execl(exe.c_str(), exe.c_str(), out_dir.c_str(), ckpt_dir.c_str(), steps.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Checks the output file; returns its last step (0 when it has no rows, -1 when there is no file yet).
int64_t check_output(const std::string& path, const std::string& context) {
  if (!fs::exists(path)) return -1;
  test_h5::File f(path);
  BOOST_TEST_REQUIRE(f.id >= 0, context << ": the output file does not open");
  const auto steps = test_h5::int64s(f.id, "/steps/step");
  for (size_t i = 0; i < steps.size(); ++i)
    BOOST_TEST_REQUIRE(steps[i] == static_cast<int64_t>(i) + 1, context << ": steps are not 1, 2, 3, ...");
  // Every /steps dataset has one element per step; spot-check values written as step * 1000 + column.
  for (const std::string name : {"time/generation", "kl", "memory/peak_total", "test/late"}) {
    if (!test_h5::link_exists(f.id, "/steps/" + name)) {  // metrics appear with the first row; test/late at step 5
      BOOST_TEST_REQUIRE((steps.empty() || (name == "test/late" && steps.size() < 5)), context << ": no /steps/" << name);
      continue;
    }
    const auto v = test_h5::doubles(f.id, "/steps/" + name);
    BOOST_TEST_REQUIRE(v.size() == steps.size(), context << ": /steps/" << name << " has another length");
  }
  if (!steps.empty()) {
    const auto t = test_h5::doubles(f.id, "/steps/time/generation");
    BOOST_TEST_REQUIRE(t.back() == static_cast<double>(steps.back()) * 1000.0, context);
  }
  const size_t ns = test_h5::length(f.id, "/samples/step");
  BOOST_TEST_REQUIRE(test_h5::length(f.id, "/samples/prompt") == ns, context);
  BOOST_TEST_REQUIRE(test_h5::length(f.id, "/samples/completion") == ns, context);
  BOOST_TEST_REQUIRE(test_h5::length(f.id, "/samples/reward") == ns, context);
  return steps.empty() ? 0 : steps.back();
}

// Checks that the newest complete checkpoint holds exactly what the writer writes for its step; returns the step.
int64_t check_checkpoint(const std::string& dir, const std::string& context) {
  auto latest = hone::latest_complete_checkpoint(dir);
  if (!latest) return 0;
  const int64_t step = latest->step;
  BOOST_TEST_REQUIRE(hone::verify_checkpoint(latest->path, true) == "", context);
  BOOST_TEST_REQUIRE(hone::read_file_text(latest->path + "/state.json") == "{\"step\": " + std::to_string(step) + "}\n",
                     context);
  const std::string w = hone::read_file_text(latest->path + "/weights.bin");
  BOOST_TEST_REQUIRE(w.size() == 150000u + static_cast<size_t>(step % 7) * 10007u, context);
  bool bytes_ok = true;
  for (size_t i = 0; i < w.size() && bytes_ok; ++i)
    bytes_ok = static_cast<unsigned char>(w[i]) == (static_cast<uint64_t>(step) + i) % 251;
  BOOST_TEST_REQUIRE(bytes_ok, context << ": weights.bin content");
  const std::string m = hone::read_file_text(latest->path + "/optim/moments.bin");
  BOOST_TEST_REQUIRE(m == std::string(4096, static_cast<char>(step % 256)), context);
  return step;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(step_output_kill)

BOOST_AUTO_TEST_CASE(sigkill_at_random_moments_never_leaves_a_broken_file_or_checkpoint) {
  BOOST_TEST_REQUIRE(fs::exists(writer_exe()), writer_exe() << " is not built (make tests)");
  const std::string root = test::temp_dir("kill-test");
  const std::string out_dir = root + "/out", ckpt_dir = root + "/ckpt", path = out_dir + "/killtest.h5";
  std::mt19937 rng(20261122);
  std::uniform_int_distribution<int> delay_ms(10, 150);
  int64_t last_output = -1, last_ckpt = 0, live_reads = 0;
  for (int round = 0; round < 10; ++round) {
    const int ms = delay_ms(rng);
    pid_t pid = start_writer(out_dir, ckpt_dir, 1000000);
    BOOST_TEST_REQUIRE(pid > 0);
    // While it runs, the file is read again and again from this process, as a user's h5py would.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      check_output(path, "round " + std::to_string(round) + ", read while the writer runs");
      ++live_reads;
      std::this_thread::sleep_for(std::chrono::milliseconds(3));  // leave the CPU to the writer
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    BOOST_TEST(WIFSIGNALED(status), "round " << round << ": the writer ended before the kill, status " << status);
    const std::string context = "round " + std::to_string(round) + " (killed after " + std::to_string(ms) + " ms)";
    last_output = check_output(path, context);
    last_ckpt = check_checkpoint(ckpt_dir, context);
    // The row of a step is written before its checkpoint, so the file is never behind the newest checkpoint.
    if (last_ckpt > 0) BOOST_TEST(last_output >= last_ckpt, context);
    BOOST_TEST_MESSAGE(context << ": output rows to step " << last_output << ", checkpoint step " << last_ckpt);
  }
  BOOST_TEST_MESSAGE(live_reads << " reads of the file while the writer ran");
  BOOST_TEST(live_reads >= 20);
  // Run to the end from wherever the kills left it: the resumed run completes and the file has every step once.
  const int64_t final_step = last_ckpt + 5;
  pid_t pid = start_writer(out_dir, ckpt_dir, final_step);
  int status = 0;
  ::waitpid(pid, &status, 0);
  BOOST_TEST_REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "status " << status);
  BOOST_TEST(check_output(path, "final run") == final_step);
  BOOST_TEST(check_checkpoint(ckpt_dir, "final run") == final_step - final_step % 2);
  // keep = 2 and no temporary folders left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(ckpt_dir)) names.push_back(e.path().filename().string());
  BOOST_TEST(names.size() == 2u);
  for (const auto& n : names) BOOST_TEST(n.rfind("step_", 0) == 0u, n);
}

BOOST_AUTO_TEST_SUITE_END()
