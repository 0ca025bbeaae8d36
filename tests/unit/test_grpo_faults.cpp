// Faults of `hone run` on the CPU (doc/runtime.md, "Faults and bad input"): a rank stopped with kill -STOP under
// mpirun, a model too large for host memory, an update that leaves the weights non-finite. Each ends with one
// message and its exit code, never a hang, a library's message or a checkpoint that resume would pick.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "model/model_config.h"
#include "test_grpo_util.h"

namespace fs = std::filesystem;
using namespace test_grpo;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string cat_pid(pid_t pid) { return "pid " + std::to_string(pid) + ","; }

}  // namespace

BOOST_AUTO_TEST_SUITE(grpo_faults)

// Two ranks; once the run is under way rank 1 is stopped (SIGSTOP, as `kill -STOP`). Rank 0 waits for it in its
// next collective until parallel.collective_timeout_s (2 s) passes, then the job ends: one message naming the
// collective, exit 1, the stopped rank ended by mpirun.
BOOST_AUTO_TEST_CASE(kill_stop_of_one_rank_ends_the_job_with_one_message) {
  const std::string dir = test::temp_dir("grpo-kill-stop");
  const std::string deck = write_deck(dir);
  char cmd[4096];
  std::snprintf(cmd, sizeof cmd,
                "sh -c 'timeout 90 mpirun -np 2 --oversubscribe --allow-run-as-root -x HONE_ERROR_GRACE_S=1 %s run %s "
                "run.max_steps=100000 "
                "parallel.collective_timeout_s=2 > %s/log 2>&1 & t=$!; i=0; "
                "while [ ! -f %s/out/t.h5 ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; sleep 0.5; "
                "for m in $(pgrep -P $t); do for p in $(pgrep -P $m); do "
                "if tr \"\\000\" \"\\n\" < /proc/$p/environ | grep -qx OMPI_COMM_WORLD_RANK=1; then kill -STOP $p; "
                "echo stopped $p; fi; done; done; wait $t; echo rc=$?'",
                test::hone_exe().c_str(), deck.c_str(), dir.c_str(), dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  std::string shell;
  test::run_command(cmd, &shell);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string log = file_bytes(dir + "/log");
  BOOST_TEST_MESSAGE(shell << log.substr(log.size() > 1500 ? log.size() - 1500 : 0));
  BOOST_REQUIRE(shell.find("stopped ") != std::string::npos);  // rank 1 was found and stopped
  BOOST_TEST(shell.find("rc=1") != std::string::npos);          // rc=124: left hanging until timeout killed it
  BOOST_TEST(seconds < 60.0);
  BOOST_TEST(count(log, "hone: error:") == 1u);
  BOOST_TEST(count(log, "[rank 0] hone: error: MPI ") == 1u);
  BOOST_TEST(count(log, "did not complete within 2 s (parallel.collective_timeout_s): a rank of the group stopped "
                        "answering or is far behind") == 1u);
}

// A random-init model of 4e12 parameters (16 TB of fp32 per copy) used to end with `check failed: p != nullptr ...
// host allocation of ... bytes failed` (exit 1). The host memory planner refuses it before anything is allocated or
// written, with the numbers and the keys; under mpirun the ranks print it once.
BOOST_AUTO_TEST_CASE(a_model_too_large_for_host_memory_is_refused_before_allocating) {
  const std::string dir = test::temp_dir("grpo-host-memory");
  const std::string deck = write_deck(dir);
  const std::string huge = "model.hidden_size=65536 model.intermediate_size=262144 model.num_layers=64";
  for (const std::string prefix : {"", "timeout 60 mpirun -np 2 --oversubscribe --allow-run-as-root "}) {
    BOOST_TEST_CONTEXT(prefix) {
      std::string out;
      BOOST_TEST(hone_run(deck, huge, &out, prefix) == 2);
      BOOST_TEST_MESSAGE(out);
      BOOST_TEST(count(out, "hone: error:") == 1u);
      BOOST_TEST(count(out, "hone: error: host memory cannot hold this run: ") == 1u);  // no [rank r]: every rank
      BOOST_TEST(count(out, " parameters (training, gradients) = ") == 1u);
      BOOST_TEST(count(out, "To fit: parallel.tp = 2 ") == 1u);
      BOOST_TEST(count(out, "host allocation") == 0u);
      BOOST_TEST(!fs::exists(dir + "/out"));  // nothing written
      BOOST_TEST(!fs::exists(dir + "/ck"));
    }
  }
}

// Sizes that drive allocations, weighed before anything is allocated for them: a config.json of a billion layers
// (random init from it, hone run and hone check: the parameter table and per-layer state grew by 11 GB in 25 s),
// the same shape from the deck's keys, and a step's or a validation's samples no host holds (1e9 prompts per step,
// 2e9 validation problems of 1000 completions: the kernel's OOM killer after minutes, or a set-up that never ended).
BOOST_AUTO_TEST_CASE(size_driven_allocations_are_planned_before_they_are_made) {
  const std::string dir = test::temp_dir("grpo-size-plans");
  const std::string deck = write_deck(dir);
  hone::ModelConfig big;
  big.arch = hone::Architecture::qwen3;
  big.vocab_size = 256, big.hidden_size = 8, big.intermediate_size = 8, big.num_hidden_layers = 1000000000;
  big.num_attention_heads = 2, big.num_key_value_heads = 2, big.head_dim = 4, big.max_position_embeddings = 64;
  big.rope.head_dim = 4, big.qk_norm = true;
  fs::create_directories(dir + "/big");
  std::ofstream(dir + "/big/config.json") << hone::model_config_to_hf_json(big);
  const std::string layers = "num_hidden_layers = 1000000000 is more than hone's limit of 16384 layers";
  // The tiny deck with its [model] section replaced by the big config.json, drawn at random.
  std::string text = tiny_deck(dir);
  text = text.substr(0, text.find("[model]")) + "[model]\npath = \"" + dir + "/big\"\ninit = \"random\"\n" +
         text.substr(text.find("[tokenizer]"));
  fs::create_directories(dir + "/from-config");
  const std::string from_config = write_deck(dir + "/from-config", text);
  std::string out;
  BOOST_TEST(hone_run(from_config, "", &out) == 2);
  BOOST_TEST(count(out, "hone: error:") == 1u, out);
  BOOST_TEST(count(out, dir + "/big/config.json: model config: " + layers) == 1u, out);
  BOOST_TEST(test::run_command(test::hone_exe() + " check " + from_config, &out) == 2);
  BOOST_TEST(count(out, layers) == 1u, out);
  BOOST_TEST(hone_run(deck, "model.num_layers=1000000000", &out) == 2);  // the deck's range: with its place
  BOOST_TEST(count(out, "hone: error: override 'model.num_layers=1000000000': 'model.num_layers' = 1000000000 is out "
                        "of range") == 1u, out);

  BOOST_TEST(hone_run(deck, "grpo.num_prompts_per_step=1000000000", &out) == 2);
  BOOST_TEST(count(out, "hone: error:") == 1u, out);
  BOOST_TEST(count(out, "hone: error: host memory cannot hold this run: ") == 1u, out);
  BOOST_TEST(count(out, " for 4000000000 rollouts of a step (grpo.num_prompts_per_step x "
                        "grpo.num_generations_per_prompt), at least their records") == 1u, out);
  BOOST_TEST(count(out, "fewer prompts per step or validation problems") == 1u, out);
  BOOST_TEST(hone_run(deck, "validation.every=1 validation.max_samples=2000000000 validation.num_generations=1000",
                      &out) == 2);
  BOOST_TEST(count(out, "hone: error: host memory cannot hold this run: ") == 1u, out);
  BOOST_TEST(count(out, " and 2000000000 validation problems with 2000000000000 completions (validation.max_samples x "
                        "validation.num_generations)") == 1u, out);
  BOOST_TEST(!fs::exists(dir + "/out"));
  BOOST_TEST(!fs::exists(dir + "/ck"));
}

// A full disk in output.dir, simulated by a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so that a write
// past it fails with EFBIG; Open MPI's singleton keeps its own files small with PMIx's hash store and the self
// transport). The error line used to be followed by a SIGSEGV at exit inside the HDF5 library, whose file stayed
// open after a failed H5Fclose. Now the file is built in memory and written by hone: one line, exit 2, and the
// previous file stays readable with whole steps.
BOOST_AUTO_TEST_CASE(a_full_disk_ends_in_one_line_and_leaves_the_old_file_readable) {
  const std::string dir = test::temp_dir("grpo-full-disk");
  const std::string deck = write_deck(dir);
  for (const char* limit : {"150000", "215000", "250000"}) {
    BOOST_TEST_CONTEXT("file size limit " << limit) {
      fs::remove_all(dir + "/out");
      fs::remove_all(dir + "/ck");
      std::string out;
      const int rc = hone_run(deck, "run.max_steps=40 output.sample_every=1 output.num_samples=16 output.rollouts=all",
                              &out,
                              std::string("trap '' XFSZ; PMIX_MCA_gds=hash OMPI_MCA_btl=self prlimit --fsize=") + limit + " ");
      BOOST_TEST_MESSAGE(out);
      BOOST_TEST(rc == 2);
      BOOST_TEST(count(out, "hone: error:") == 1u);
      BOOST_TEST(count(out, "File too large") == 1u);
      BOOST_TEST(count(out, "HDF5") == 0u);
      BOOST_TEST(test_h5::File(dir + "/out/t.h5").id >= 0);  // the file of the last step that fitted (or of none)
      const std::vector<int64_t> st = steps(dir + "/out/t.h5");
      for (size_t i = 0; i < st.size(); ++i) BOOST_TEST(st[i] == int64_t(i + 1));
    }
  }
}

// Starts `hone run deck args` in the background with `env` before it; returns its pid once the output file exists.
pid_t start_background_run(const std::string& dir, const std::string& deck, const std::string& args,
                           const std::string& env = "") {
  const std::string pidfile = dir + "/bg.pid";
  fs::remove(pidfile);
  test::run_command("sh -c '" + env + " " + test::hone_exe() + " run " + deck + " " + args + " > " + dir +
                    "/bg.log 2>&1 & echo $! > " + pidfile + "'");
  pid_t pid = -1;
  for (int i = 0; i < 3000 && !(fs::exists(dir + "/out/t.h5") && pid > 0); ++i) {
    std::ifstream in(pidfile);
    long p = 0;
    if (in >> p) pid = pid_t(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pid;
}

// Run B started while run A holds the same folders used to delete A's checkpoints and rewrite its file
// (output.overwrite) or resume from A's checkpoint while A went on (run.resume=auto). Now B is refused, naming A;
// once A is gone (killed: the kernel drops its lock) B may take the folders; a copy of the same Slurm job (a
// requeue) waits for the first copy to end.
BOOST_AUTO_TEST_CASE(a_second_run_on_the_same_folders_is_refused_while_the_first_holds_them) {
  const std::string dir = test::temp_dir("grpo-folder-lock");
  const std::string deck = write_deck(dir);
  const pid_t a = start_background_run(dir, deck, "run.max_steps=1000000");
  BOOST_REQUIRE(a > 0);
  const std::string holder = "is in use by host ";
  const std::vector<std::string> second = {"output.overwrite=true", "run.resume=auto", "checkpoint.dir=" + dir + "/other"};
  for (const std::string& args : second) {
    BOOST_TEST_CONTEXT(args) {
      std::string out;
      BOOST_TEST(hone_run(deck, args + " run.max_steps=2", &out) == 2);
      BOOST_TEST(count(out, "hone: error: output.dir '" + dir + "/out' " + holder) == 1u, out);
      BOOST_TEST(count(out, cat_pid(a)) == 1u, out);
    }
  }
  std::string out;
  BOOST_TEST(hone_run(deck, "output.dir=" + dir + "/out2 run.max_steps=2", &out) == 2);  // checkpoint.dir still held
  BOOST_TEST(count(out, "hone: error: checkpoint.dir '" + dir + "/ck' " + holder) == 1u, out);
  ::kill(a, SIGKILL);
  for (int i = 0; i < 500 && ::kill(a, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(hone_run(deck, "run.resume=auto run.max_steps=2", &out) == 0, out);

  // A requeue of the same Slurm job waits for the first copy, then runs.
  fs::remove_all(dir + "/out");
  fs::remove_all(dir + "/ck");
  const pid_t first = start_background_run(dir, deck, "run.max_steps=1000000", "SLURM_JOB_ID=4242");
  BOOST_REQUIRE(first > 0);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    ::kill(first, SIGKILL);
  });
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = hone_run(deck, "run.resume=auto run.max_steps=2", &out, "SLURM_JOB_ID=4242 ");
  killer.join();
  BOOST_TEST(rc == 0, out);
  BOOST_TEST(count(out, "a copy of this Slurm job: waiting up to 120 s") == 1u, out);
  BOOST_TEST(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 1.5);
}

// Non-finite updates are skipped (grpo_nonfinite), but an update with a finite gradient norm can still overflow the
// weights: train.learning_rate = 1e39 is beyond fp32 and makes every updated weight Inf or NaN. Such a state used to
// be checkpointed and marked COMPLETE, and run.resume=auto picked it. Now it is never written: the run ends with one
// line (exit 2), the last good checkpoint stays the newest, and resuming from it works.
BOOST_AUTO_TEST_CASE(a_non_finite_training_state_is_never_checkpointed_nor_resumed) {
  const std::string dir = test::temp_dir("grpo-nonfinite-checkpoint");
  const std::string deck = write_deck(dir);
  BOOST_REQUIRE_EQUAL(hone_run(deck, "run.max_steps=2 checkpoint.every=1"), 0);
  std::string out;
  BOOST_TEST(hone_run(deck, "run.resume=auto run.max_steps=4 checkpoint.every=1 train.learning_rate=1e39", &out) == 2);
  BOOST_TEST(count(out, "hone: error: step 3: the training state is not finite (") == 1u, out);
  BOOST_TEST(count(out, "holds NaN or Inf after the update): no checkpoint written, the newest complete one is kept; "
                        "the run diverged: lower train.learning_rate or keep train.max_grad_norm > 0") == 1u);
  const auto ck = hone::latest_complete_checkpoint(dir + "/ck");
  BOOST_REQUIRE(ck.has_value());
  BOOST_TEST(ck->step == 2);
  BOOST_TEST(hone_run(deck, "run.resume=auto run.max_steps=4 checkpoint.every=1", &out) == 0, out);
  BOOST_TEST(count(out, "resuming from " + dir + "/ck/step_00000002") == 1u);
  BOOST_TEST(steps(dir + "/out/t.h5") == (std::vector<int64_t>{1, 2, 3, 4}));

  // A checkpoint holding NaN weights from elsewhere (its marker's sizes and hashes match: a changed byte alone is
  // found by the hash, checkpoint/resume_checks_the_hashes_...) is refused by name on resume.
  const std::string weights = dir + "/ck/step_00000004/model.safetensors";
  std::string bytes = file_bytes(weights);
  const uint32_t nan_bits = 0x7fc00000u;
  std::memcpy(&bytes[bytes.size() - 4], &nan_bits, 4);  // the last parameter's last value
  std::ofstream(weights, std::ios::binary | std::ios::trunc) << bytes;
  {
    const std::string marker = dir + "/ck/step_00000004/COMPLETE";
    nlohmann::json m = nlohmann::json::parse(file_bytes(marker));
    for (auto& f : m["files"])
      if (f["path"] == "model.safetensors" && f.contains("fnv1a64")) f["fnv1a64"] = hone::fnv1a64_file(weights);
    std::ofstream(marker, std::ios::trunc) << m.dump();
  }
  BOOST_TEST(hone_run(deck, "run.resume=auto run.max_steps=5", &out) == 2);
  BOOST_TEST(count(out, "hone: error: checkpoint " + dir + "/ck/step_00000004 holds a non-finite training state (") == 1u, out);
  BOOST_TEST(count(out, "move it out of " + dir + "/ck to resume from the one before") == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
