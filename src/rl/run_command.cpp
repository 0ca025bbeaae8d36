// `hone run deck.toml [key=value ...]`: the GRPO job. Reads and checks the deck on every rank, echoes it, makes the
// rank grid and its communicators (ParallelState) from the deck's [parallel] section, builds the trainer, prepares
// the checkpoint folder and the output file (rank 0), resumes when asked, then runs run.max_steps steps: one HDF5
// row and one stdout line per step, checkpoints every checkpoint.every steps and at exit. SIGTERM / SIGUSR1: the
// current step finishes, a checkpoint is written, exit code 3.
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/host_collectives.h"
#include "comm/parallel_state.h"
#include "config/config.h"
#include "io/checkpoint.h"
#include "io/step_output.h"
#include "io/step_output_line.h"
#include "rl/grpo_trainer.h"
#include "runtime/agree.h"
#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/runtime.h"
#include "runtime/signals.h"
#include "runtime/version.h"

namespace hone::rl {
namespace {

void print_rank0(const std::string& text) {
  if (world_rank() != 0) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Rank 0: the checkpoint folder and the output file (refusing to overwrite unless the deck says so); elsewhere null.
// Collective: every rank gets the path of the checkpoint to resume from (empty: none).
std::unique_ptr<StepOutput> prepare_output(const Config& cfg, const GrpoSettings& s, const CheckpointOptions& copt,
                                           const ParallelState& ps, std::string& resume_from) {
  const CheckpointStart start = s.resume ? CheckpointStart::resume
                                : s.overwrite ? CheckpointStart::overwrite
                                              : CheckpointStart::fresh;
  std::unique_ptr<StepOutput> out;
  agreed([&] {
    if (ps.world_rank() != 0) return;
    auto make_output = [&](int64_t resume_step) {
      out = std::make_unique<StepOutput>(StepOutputOptions::from_config(cfg, resume_step, ps.world_size(), "none"));
      for (const auto& m : grpo_extra_metrics()) out->declare_metric(m.name, m.unit, m.description);
    };
    if (start == CheckpointStart::overwrite) {
      make_output(-1);  // checks output.dir before the old checkpoints are deleted
      prepare_checkpoint_dir(copt, start);
    } else {
      const std::optional<CheckpointInfo> ck = prepare_checkpoint_dir(copt, start);
      if (ck) resume_from = ck->path;
      make_output(ck ? ck->step : (s.resume ? 0 : -1));
    }
  });
  resume_from = broadcast_string(ps.world(), resume_from);
  return out;
}

int run_run(const std::vector<std::string>& args) {
  if (args.empty()) throw UserError("run: no deck given (usage: hone run deck.toml [key=value ...])");
  if (args[0] == "--help" || args[0] == "-h") {
    print_rank0("usage: hone run deck.toml [key=value ...]\n"
                "Runs GRPO as the deck says (see doc/quickstart.md). Exit codes: 0 done, 2 bad input, 3 stopped by\n"
                "SIGTERM/SIGINT/SIGUSR1 after writing a checkpoint (continue with run.resume=auto), 1 internal error.\n");
    return kExitOk;
  }
  const std::vector<std::string> overrides(args.begin() + 1, args.end());
  const Config cfg = agreed([&] { return load_config(args[0], overrides); });
  set_log_level(parse_log_level(cfg.get_string("run.log_level")));
  if (cfg.get_bool("run.log_all_ranks")) set_log_all_ranks(true);
  print_rank0(cat("# hone ", version(), " (", git_commit(), ") run: the resolved deck\n", cfg.to_toml(), "\n"));

  // The rank grid (parallel.tp and parallel.pp must be 1 for now), then its communicators: collective.
  const ParallelState ps(agreed([&] { return read_rank_grid(cfg, world_size()); }));
  // Every input is read and checked before anything on disk changes.
  std::unique_ptr<GrpoTrainer> trainer = agreed([&] {
    const Activity activity("setting up the run (tokenizer, model, prompts)");
    return std::make_unique<GrpoTrainer>(cfg, ps);
  });
  const GrpoSettings& s = trainer->settings();
  trainer->connect();  // every rank built its trainer: now the communicators and the data-parallel optimizer

  const CheckpointOptions copt = CheckpointOptions::from_config(cfg);
  std::string resume_from;
  const std::unique_ptr<StepOutput> out = prepare_output(cfg, s, copt, ps, resume_from);
  int64_t done = 0;
  if (!resume_from.empty()) {
    done = trainer->restore(resume_from);  // collective; the files are checked on every rank first
    log_info("resuming from ", resume_from, " (step ", done, ")");
  }
  log_info(trainer->describe());
  if (out) log_info("output: ", out->path());

  install_stop_handlers();
  auto checkpoint = [&](int64_t step) {
    const GrpoTrainer::Snapshot snap = trainer->snapshot();  // collective: a sharded optimizer gathers to rank 0
    std::string where;
    agreed([&] {
      if (ps.world_rank() == 0)
        where = save_checkpoint(copt, step, [&](const std::string& folder) { trainer->save(folder, step, snap); }).path;
    });
    log_info("checkpoint: ", where.empty() ? copt.dir : where);
  };

  print_rank0(step_line_header() + "\n");
  int64_t last_saved = done;
  for (int64_t step = done + 1; step <= s.max_steps; ++step) {
    // Every rank knows when samples are due (they are gathered from the ranks that generated them).
    const int64_t nsamples = s.sample_every > 0 && step % s.sample_every == 0 ? s.num_samples : 0;
    const Activity activity(cat("running GRPO step ", step));
    const StepRow row = trainer->step(step, nsamples);
    if (out) out->append(row);
    print_rank0(format_step_line(row) + "\n");
    if (s.checkpoint_every > 0 && step % s.checkpoint_every == 0) {
      checkpoint(step);
      last_saved = step;
    }
    if (stop_requested_on_any_rank()) {
      if (last_saved != step) checkpoint(step);
      const int sig = stop_signal();
      log_info("hone: stopped by ", stop_signal_name(sig), " after step ", step,
               "; checkpoint written; continue with run.resume=auto (exit code ", int(kExitInterrupted), ")");
      return kExitInterrupted;
    }
  }
  if (s.checkpoint_at_exit && last_saved != s.max_steps && done < s.max_steps) checkpoint(s.max_steps);
  log_info("done: ", s.max_steps, " steps", out ? cat(", output in ", out->path()) : std::string());
  return kExitOk;
}

const CommandRegistration run_reg{{"run", "run GRPO training as an input deck says", true, &run_run}};

}  // namespace
}  // namespace hone::rl
