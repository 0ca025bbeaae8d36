// The Slurm suite's entry point: one Boost.Test module whose global fixture starts a private one-node Slurm
// (munged, slurmctld, slurmd on 127.0.0.1, tests/slurm/cluster.sh) before the cases and stops it after them.
#define BOOST_TEST_MODULE hone_slurm
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/paths.h"
#include "slurm/slurm_cluster.h"

namespace test_slurm {
namespace {

Cluster g_cluster;

std::string script() { return test::source_dir() + "/tests/slurm/cluster.sh"; }

struct ClusterFixture {
  void setup() {
    std::string out;
    const int rc = test::run_command("bash " + script() + " check", &out);
    if (rc == 77) {
      g_cluster.skip_reason = out;
      while (!g_cluster.skip_reason.empty() && g_cluster.skip_reason.back() == '\n') g_cluster.skip_reason.pop_back();
      BOOST_TEST_MESSAGE("Slurm suite skipped: " << g_cluster.skip_reason);
      return;
    }
    // A short path under /tmp: munge's and PMIx's sockets live in it (a socket path has at most 107 bytes).
    char tmpl[] = "/tmp/hone-slurm.XXXXXX";
    if (!mkdtemp(tmpl)) {
      g_cluster.start_error = "cannot create a folder under /tmp";
      return;
    }
    g_cluster.dir = tmpl;
    const int st = test::run_command(
        "timeout 120 bash " + script() + " start " + g_cluster.dir + " " + std::to_string(getpid()), &out);
    BOOST_TEST_MESSAGE(out);
    if (rc != 0 || st != 0)
      g_cluster.start_error = "Slurm did not start (cluster.sh check: " + std::to_string(rc) + ", start: " +
                              std::to_string(st) + "):\n" + out;
    else
      g_cluster.usable = true;
  }
  void teardown() {
    if (g_cluster.dir.empty()) return;
    std::string out;
    test::run_command("timeout 60 bash " + script() + " stop " + g_cluster.dir, &out);
    if (!out.empty()) BOOST_TEST_MESSAGE(out);
    if (!std::getenv("HONE_KEEP_SLURM_DIR")) std::filesystem::remove_all(g_cluster.dir);
  }
};

}  // namespace

BOOST_TEST_GLOBAL_FIXTURE(ClusterFixture);

const Cluster& cluster() { return g_cluster; }

boost::test_tools::assertion_result available(boost::unit_test::test_unit_id) {
  boost::test_tools::assertion_result r(g_cluster.skip_reason.empty());
  if (!r) r.message() << "skipped: Slurm cannot run here: " << g_cluster.skip_reason;
  return r;
}

int slurm_command(const std::string& cmd, std::string* output) {
  return test::run_command("export SLURM_CONF=" + g_cluster.dir + "/slurm.conf; " + cmd, output);
}

std::string daemon_logs() {
  std::string out;
  test::run_command("bash " + script() + " logs " + g_cluster.dir, &out);
  return out;
}

}  // namespace test_slurm
