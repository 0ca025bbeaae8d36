// The private Slurm cluster the Slurm suite submits to (tests/slurm/cluster.sh), started once for the whole suite by
// a global fixture and stopped at its end, by the pids it recorded.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

namespace test_slurm {

struct Cluster {
  bool usable = false;      // the daemons are up
  std::string skip_reason;  // non-empty: this machine cannot run Slurm (not root, packages missing)
  std::string start_error;  // non-empty: it should have run but did not start (with the daemons' logs)
  std::string dir;          // its folder: slurm.conf, logs, state
};

const Cluster& cluster();

// Precondition of every Slurm case: skips with the reason where Slurm cannot run here.
boost::test_tools::assertion_result available(boost::unit_test::test_unit_id);

// Runs a shell command with SLURM_CONF pointing at the cluster; returns its exit status and output.
int slurm_command(const std::string& cmd, std::string* output = nullptr);

// The daemons' logs, for failure messages.
std::string daemon_logs();

}  // namespace test_slurm
