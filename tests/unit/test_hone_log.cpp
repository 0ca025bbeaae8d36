// tools/hone-log, the trackers' sidecar: a demo run with [logger] enabled starts it, and the files each tracker wrote
// in its offline mode are read back by that tracker's own reader (TensorBoard's event accumulator, MLflow's file
// store, `wandb leet inspect` of the W&B offline run) against the output file, value by value
// (tests/data/check_tracker_logs.py); a finished file is sent again; a sidecar that cannot start or lacks its package
// costs one line and never the run; doc/output.md's name table is the tool's. The trackers come from the venv that
// make deps installs (build/deps/trackers); without it those cases skip, saying so.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../common/paths.h"

namespace fs = std::filesystem;

namespace {

std::string venv_python() { return test::build_dir() + "/deps/trackers/bin/python"; }

boost::test_tools::assertion_result trackers_installed(boost::unit_test::test_unit_id) {
  const bool ok = fs::exists(venv_python()) &&
                  test::run_command(venv_python() + " -c 'import h5py, tensorboard, mlflow, wandb'") == 0;
  boost::test_tools::assertion_result r(ok);
  if (!ok)
    r.message() << "skipped: no tracker packages in " << venv_python()
                << " (make deps installs tensorboard, mlflow-skinny and wandb there from PyPI; it could not)";
  return r;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

struct Run {
  int rc = 0;
  std::string out, dir, h5;
};

// A 12-step demo (validation at 0 and 10) with the given [logger] overrides, in a fresh folder.
Run demo(const std::string& tag, const std::string& logger) {
  Run r;
  r.dir = test::temp_dir(tag);
  r.h5 = r.dir + "/out/demo.h5";
  r.rc = test::run_command(test::hone_exe() + " run input/demo.toml run.max_steps=12 output.dir=" + r.dir +
                               "/out checkpoint.dir=" + r.dir + "/ckpt " + logger,
                           &r.out);
  return r;
}

// The run every reading case checks: all three trackers, offline.
const Run& tracked_run() {
  static const Run r = demo("hone_log_live", "logger.wandb_enabled=true logger.tensorboard_enabled=true "
                                             "logger.mlflow_enabled=true logger.python=" + venv_python());
  return r;
}

void check_read_back(const std::string& tracker, const std::string& h5, const std::string& log_dir,
                     const std::string& run_name = "demo") {
  std::string out;
  const int rc = test::run_command(venv_python() + " tests/data/check_tracker_logs.py " + tracker + " " + h5 + " " +
                                       log_dir + " " + run_name,
                                   &out);
  BOOST_TEST(rc == 0, tracker << ": " << out);
  BOOST_TEST(out.find("ok: ") != std::string::npos, out);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hone_log)

BOOST_AUTO_TEST_CASE(tensorboard_events_read_back, *boost::unit_test::precondition(trackers_installed)) {
  const Run& r = tracked_run();
  BOOST_TEST_REQUIRE(r.rc == 0, r.out);
  BOOST_TEST(count(r.out, "logger: tools/hone-log (pid ") == 1, r.out);
  BOOST_TEST(count(r.out, "hone-log: error") == 0, r.out);
  check_read_back("tensorboard", r.h5, r.dir + "/out/demo.logs");
}

BOOST_AUTO_TEST_CASE(mlflow_file_store_read_back, *boost::unit_test::precondition(trackers_installed)) {
  const Run& r = tracked_run();
  BOOST_TEST_REQUIRE(r.rc == 0, r.out);
  check_read_back("mlflow", r.h5, r.dir + "/out/demo.logs");
}

BOOST_AUTO_TEST_CASE(wandb_offline_run_read_back, *boost::unit_test::precondition(trackers_installed)) {
  const Run& r = tracked_run();
  BOOST_TEST_REQUIRE(r.rc == 0, r.out);
  check_read_back("wandb", r.h5, r.dir + "/out/demo.logs");
}

// A finished file, sent once more by hand to another folder and run name.
BOOST_AUTO_TEST_CASE(finished_file_sent_again, *boost::unit_test::precondition(trackers_installed)) {
  const Run& r = tracked_run();
  BOOST_TEST_REQUIRE(r.rc == 0, r.out);
  const std::string again = test::temp_dir("hone_log_again");
  std::string out;
  const int rc = test::run_command(venv_python() + " tools/hone-log " + r.h5 + " --tensorboard --log-dir " + again +
                                       " --run-name again",
                                   &out);
  BOOST_TEST_REQUIRE(rc == 0, out);
  BOOST_TEST(out.find("hone-log: 12 steps of ") != std::string::npos, out);
  check_read_back("tensorboard", r.h5, again, "again");
}

// The sidecar's failure is one line, and the run goes on to its end (exit 0).
BOOST_AUTO_TEST_CASE(failure_costs_one_line_never_the_run) {
  const Run no_python = demo("hone_log_no_python", "logger.tensorboard_enabled=true logger.python=/nonexistent/python3");
  BOOST_TEST(no_python.rc == 0, no_python.out);
  BOOST_TEST(count(no_python.out, "logger: tensorboard get nothing: cannot start logger.python = '/nonexistent/python3'") == 1,
             no_python.out);
  BOOST_TEST(count(no_python.out, "done: 12 steps") == 1, no_python.out);

  // An interpreter without the package (a venv of Debian's Python without site packages).
  const std::string bare = test::temp_dir("hone_log_bare_venv") + "/venv";
  if (test::run_command("/usr/bin/python3 -m venv --without-pip " + bare) != 0) return;
  const Run no_package = demo("hone_log_no_package", "logger.mlflow_enabled=true logger.python=" + bare + "/bin/python");
  BOOST_TEST(no_package.rc == 0, no_package.out);
  BOOST_TEST(count(no_package.out, "hone-log: error: ") == 1, no_package.out);
  BOOST_TEST(count(no_package.out, "training goes on without the trackers") == 1, no_package.out);
  BOOST_TEST(count(no_package.out, "done: 12 steps") == 1, no_package.out);
}

// doc/output.md's table of tracker names is the tool's own (hone-log --names).
BOOST_AUTO_TEST_CASE(doc_table_is_the_tools) {
  std::string names;
  BOOST_TEST_REQUIRE(test::run_command("/usr/bin/python3 tools/hone-log --names", &names) == 0, names);
  std::ifstream in(test::source_dir() + "/doc/output.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  std::istringstream lines(names);
  int rows = 0;
  for (std::string l; std::getline(lines, l);) {
    const size_t tab = l.find('\t');
    BOOST_TEST_REQUIRE(tab != std::string::npos, l);
    std::string hone = l.substr(0, tab);
    const std::string tracker = l.substr(tab + 1);
    std::string row;
    if (hone.rfind("validation ", 0) == 0)
      row = "| `/validation/" + hone.substr(11) + "` | `" + tracker + "` |";
    else
      row = "| `" + hone + "` | `" + tracker + "` |";
    BOOST_TEST(doc.find(row) != std::string::npos, "doc/output.md lacks the row " << row);
    ++rows;
  }
  BOOST_TEST(rows > 10);
}

BOOST_AUTO_TEST_SUITE_END()
