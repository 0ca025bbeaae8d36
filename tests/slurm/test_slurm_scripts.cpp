// The job scripts without a Slurm: both share one body, and the srun line they build has GPU options exactly when
// GPUs are asked for (a stand-in `srun` on PATH prints its arguments; no scheduler needed, so this runs anywhere).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "common/paths.h"

namespace {

std::string body_of(const std::string& script) {
  std::ifstream f(test::source_dir() + "/jobs/" + script);
  std::stringstream s;
  s << f.rdbuf();
  const std::string text = s.str();
  const size_t at = text.find("# ==== below this line");
  return at == std::string::npos ? std::string() : text.substr(at);
}

// Runs a script as a plain shell script with a stand-in srun; returns its output (the stand-in's line included).
std::string run_with_fake_srun(const std::string& script, const std::string& env, int* rc) {
  const std::string dir = test::temp_dir("slurm-script");
  {
    std::ofstream f(dir + "/srun");
    f << "#!/bin/bash\necho \"fake-srun: $*\"\nexit 0\n";
  }
  std::string out;
  *rc = test::run_command("chmod +x " + dir + "/srun && cd " + dir + " && env -u SLURM_GPUS_PER_NODE -u SLURM_GPUS_ON_NODE " +
                              "PATH=" + dir + ":$PATH HONE_RUN_DIR=" + dir + "/run " + env + " bash " +
                              test::source_dir() + "/jobs/" + script + " deck.toml run.max_steps=3",
                          &out);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(slurm_scripts)

BOOST_AUTO_TEST_CASE(both_scripts_share_one_body) {
  const std::string one = body_of("hone-1node.sbatch"), many = body_of("hone-multinode.sbatch");
  BOOST_TEST(one.size() > 1000u);
  BOOST_TEST(one == many);
}

BOOST_AUTO_TEST_CASE(srun_gets_gpu_options_only_with_gpus) {
  for (const std::string script : {"hone-1node.sbatch", "hone-multinode.sbatch"}) {
    int rc = -1;
    const std::string gpu = run_with_fake_srun(script, "HONE_GPUS_PER_NODE=4 SLURM_CPUS_PER_TASK=16", &rc);
    BOOST_TEST_INFO(script << ":\n" << gpu);
    BOOST_TEST(rc == 0);
    BOOST_TEST(gpu.find("fake-srun: --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores --cpus-per-task=16 "
                        "--gpus-per-task=1 --gpu-bind=none hone run deck.toml output.dir=") != std::string::npos);
    BOOST_TEST(gpu.find("run.resume=auto run.max_steps=3\n") != std::string::npos);

    const std::string cpu = run_with_fake_srun(script, "SLURM_GPUS_PER_NODE=gpu:0 HONE_BIN=/x/hone", &rc);
    BOOST_TEST_INFO(script << ":\n" << cpu);
    BOOST_TEST(rc == 0);
    BOOST_TEST(cpu.find("fake-srun: --mpi=pmix --kill-on-bad-exit=1 --cpu-bind=cores /x/hone run deck.toml") !=
               std::string::npos);
    BOOST_TEST(cpu.find("--gpu") == std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(no_deck_is_a_usage_error) {
  std::string out;
  const int rc = test::run_command("bash " + test::source_dir() + "/jobs/hone-1node.sbatch", &out);
  BOOST_TEST(rc == 2);
  BOOST_TEST(out.find("usage: sbatch") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
