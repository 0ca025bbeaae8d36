// `hone run deck.toml [key=value ...] [--echo-deck]`: the GRPO job. Reads and checks the deck on every rank, makes
// the rank grid and its communicators (ParallelState) from the deck's [parallel] section, prints a short header
// (run, model, layout, output), builds the trainer, prepares the checkpoint folder and the output file (rank 0) and
// writes the resolved deck next to it, resumes when asked (refusing a deck that changes what the checkpoint cannot
// carry, listing the other changes: rl/resume_deck.h), then runs run.max_steps steps: one HDF5 row and one
// stdout line per step, checkpoints every checkpoint.every steps and at exit. SIGTERM / SIGINT / SIGUSR1: the
// current step finishes, a checkpoint is written, exit code 3.
//
// The resolved deck (130 lines) is printed only with --echo-deck: a job log starts with the header and ends with
// the error when there is one, so the error is what a user sees first.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/host_collectives.h"
#include "comm/parallel_state.h"
#include "config/config.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/folder_lock.h"
#include "io/step_output.h"
#include "io/step_output_line.h"
#include "io/tracker_sidecar.h"
#include "model/model_source.h"
#include "rl/moe_metrics.h"
#include "rl/grpo_trainer.h"
#include "rl/resume_deck.h"
#include "runtime/agree.h"
#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/mpi_watchdog.h"
#include "runtime/progress.h"
#include "runtime/runtime.h"
#include "runtime/signals.h"
#include "runtime/version.h"

namespace hone::rl {
namespace {

const char* const kRunUsage =
    "usage: hone run deck.toml [key=value ...] [--echo-deck]\n"
    "  Runs GRPO as the deck says (doc/quickstart.md; `hone help deck` lists the keys). key=value overrides a deck\n"
    "  key. Prints a header (run, model, rank layout, output) and one line per step; the resolved deck (every key,\n"
    "  with defaults) goes to the output file and to <output.dir>/<run.name>.deck.toml.\n"
    "  --echo-deck   also print the resolved deck before the first step\n"
    "  Exit codes: 0 done, 2 bad input, 3 stopped by SIGTERM/SIGINT/SIGUSR1 after writing a checkpoint\n"
    "  (continue with run.resume=auto), 1 internal error.\n";

// How long a finished run waits for tools/hone-log to send the last rows (W&B's finish takes a few seconds).
constexpr double kTrackerFinishSeconds = 60;

// jobs/hone-mpirun: mpirun exits 1 after a SIGTERM whatever the ranks return, so rank 0 leaves its exit code in
// $HONE_EXIT_CODE_FILE (when set) for the wrapper to return.
void note_exit_code_for_launcher(int code) {
  const char* path = std::getenv("HONE_EXIT_CODE_FILE");
  if (world_rank() != 0 || !path || !*path) return;
  if (std::FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%d\n", code);
    std::fclose(f);
  }
}

void print_rank0(const std::string& text) {
  if (world_rank() != 0) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Resuming from the checkpoint at `folder`: the deck against the one it was written under (its deck.json,
// rl/resume_deck.h). Throws the refusal of keys a checkpoint cannot carry; returns the accepted changes as one line
// ("" when none).
std::string check_resume_deck(const Config& cfg, const DeckRecord& now, const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / "deck.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    log_warn("checkpoint ", folder, " has no deck.json (written by an earlier hone): the deck was not compared with ",
             "the one it was written under");
    return "";
  }
  const std::vector<std::string> changed = compare_resume_deck(cfg, now, parse_deck_record(read_file_text(path), path), folder);
  std::string line;
  for (const std::string& c : changed) line += (line.empty() ? "changed " : ", ") + c;
  return line;
}

// Rank 0: the checkpoint folder and the output file (refusing to overwrite unless the deck says so); elsewhere null.
// Collective: every rank gets the path of the checkpoint to resume from (empty: none). A deck that changes what a
// checkpoint cannot carry is refused before the output file is touched.
std::unique_ptr<StepOutput> prepare_output(const Config& cfg, const GrpoSettings& s, const CheckpointOptions& copt,
                                           const ParallelState& ps, const DeckRecord& record,
                                           std::string& resume_from, std::vector<std::unique_ptr<FolderLock>>& locks) {
  // output.overwrite replaces the output file only; checkpoints are deleted by checkpoint.overwrite alone.
  const CheckpointStart start = s.resume ? CheckpointStart::resume
                                : cfg.get_bool("checkpoint.overwrite") ? CheckpointStart::overwrite
                                                                        : CheckpointStart::fresh;
  std::unique_ptr<StepOutput> out;
  agreed([&] {
    if (ps.world_rank() != 0) return;
    // One run per folder, before anything in them is read, written or deleted (io/folder_lock.h).
    const std::string out_dir = cfg.get_string("output.dir");
    locks.push_back(std::make_unique<FolderLock>(out_dir, "output.dir"));
    std::error_code ec;
    if (!copt.dir.empty() && !(std::filesystem::exists(copt.dir, ec) && std::filesystem::equivalent(copt.dir, out_dir, ec)))
      locks.push_back(std::make_unique<FolderLock>(copt.dir, "checkpoint.dir"));
    auto make_output = [&](int64_t resume_step, const std::string& note = "") {
      StepOutputOptions o = StepOutputOptions::from_config(cfg, resume_step, ps.world_size(), "none");
      o.resume_note = note;
      o.new_output_dir = note.rfind("changed output.dir ", 0) == 0 || note.find(", output.dir ") != std::string::npos;
      out = std::make_unique<StepOutput>(std::move(o));
      for (const auto& m : grpo_extra_metrics()) out->declare_metric(m.name, m.unit, m.description);
    };
    if (start == CheckpointStart::overwrite) {
      make_output(-1);  // checks output.dir before the old checkpoints are deleted
      prepare_checkpoint_dir(copt, start);
    } else {
      const std::optional<CheckpointInfo> ck = prepare_checkpoint_dir(copt, start);
      std::string changes;
      if (ck) {
        resume_from = ck->path;
        changes = check_resume_deck(cfg, record, ck->path);
        if (!changes.empty()) log_info("resuming with a changed deck: ", changes);
      }
      make_output(ck ? ck->step : (s.resume ? 0 : -1), changes);
    }
  });
  resume_from = broadcast_string(ps.world(), resume_from);
  return out;
}

// "<output.dir>/<run.name>.deck.toml": the resolved deck of this start of the run, readable by `hone run` as is.
std::string deck_copy_path(const Config& cfg) {
  return cat(cfg.get_string("output.dir"), "/", cfg.get_string("run.name"), ".deck.toml");
}

std::string resolved_deck_text(const Config& cfg) {
  return cat("# hone ", version(), " (", git_commit(), "): the resolved deck of run '", cfg.get_string("run.name"),
             "' (every key; defaults marked)\n", cfg.to_toml());
}

// Four lines: what runs, where, and where its results go. The model as the deck names it (its shape is printed
// once it is read).
std::string run_header(const Config& cfg, const ParallelState& ps) {
  const std::string path = cfg.get_string("model.path");
  const std::string model =
      !path.empty() ? path + (cfg.get_string("model.init") == "random" ? " (its config.json; random weights)" : "")
                    : cat("random init, ", cfg.get_string("model.architecture"), " (", cfg.get_int("model.num_layers"),
                          " layers, hidden ", cfg.get_int("model.hidden_size"), ")");
  const std::string h5 = cat(cfg.get_string("output.dir"), "/", cfg.get_string("run.name"), ".h5");
  return cat("hone ", version(), " (", git_commit(), ") run '", cfg.get_string("run.name"), "'\n",
             "  model   ", model, "\n",
             "  layout  ", ps.describe(), ", run.device = ", cfg.get_string("run.device"), "\n",
             "  output  ", h5, ", checkpoints in ", cfg.get_string("checkpoint.dir"), ", resolved deck in ",
             deck_copy_path(cfg), "\n");
}

int run_run(const std::vector<std::string>& args) {
  bool echo_deck = false;
  std::vector<std::string> overrides;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--echo-deck")
      echo_deck = true;
    else
      overrides.push_back(args[i]);
  }
  const Config cfg = agreed([&] {
    HONE_USER_CHECK(!args.empty() && args[0].rfind("--", 0) != 0, "run: no deck given (usage: hone run deck.toml ",
                    "[key=value ...] [--echo-deck])");
    for (const auto& o : overrides)
      HONE_USER_CHECK(o.rfind("--", 0) != 0, "run: unknown option '", o, "' (see hone run --help)");
    return load_config(args[0], overrides);
  });
  set_log_level(parse_log_level(cfg.get_string("run.log_level")));
  set_collective_timeout(cfg.get_float("parallel.collective_timeout_s"));  // the MPI watchdog (runtime/mpi_watchdog.h)
  if (cfg.get_bool("run.log_all_ranks")) set_log_all_ranks(true);

  // The rank grid, then its communicators: collective.
  const ParallelState ps(agreed([&] { return read_rank_grid(cfg, world_size()); }));
  print_rank0(run_header(cfg, ps));
  if (echo_deck) print_rank0(resolved_deck_text(cfg) + "\n");
  // Rank 0 alone shows the progress of long phases (declared before the trainer, which points to it).
  std::unique_ptr<ProgressLine> progress;
  if (ps.world_rank() == 0 && cfg.get_float("run.progress_every_s") > 0)
    progress = std::make_unique<ProgressLine>(ProgressOptions::for_stdout(cfg.get_float("run.progress_every_s")));
  // A GGUF model is converted once into the model cache (model/model_source.h), by rank 0 while the others wait.
  agreed([&] {
    if (ps.world_rank() != 0) return;
    const Activity activity("converting the GGUF model");
    for (const char* key : {"model.path", "tokenizer.path"})
      if (cfg.has_value(key)) model_folder(cfg.get_string(key));
  });
  // Every input is read and checked before anything on disk changes.
  std::unique_ptr<GrpoTrainer> trainer = agreed([&] {
    const Activity activity("setting up the run (tokenizer, model, prompts)");
    return std::make_unique<GrpoTrainer>(cfg, ps);
  });
  const GrpoSettings& s = trainer->settings();
  trainer->set_progress(progress.get());
  trainer->connect();  // every rank built its trainer: now the communicators and the data-parallel optimizer

  const CheckpointOptions copt = CheckpointOptions::from_config(cfg);
  // Rank 0 writes the checkpoints: each holds the record of this deck and of the inputs it names.
  const DeckRecord record = ps.world_rank() == 0 ? record_deck(cfg) : DeckRecord{};
  const std::string record_json = deck_record_json(record);
  std::string resume_from;
  std::vector<std::unique_ptr<FolderLock>> locks;  // held until the run ends
  const std::unique_ptr<StepOutput> out = prepare_output(cfg, s, copt, ps, record, resume_from, locks);
  if (out)
    for (const MetricDeclaration& m : moe_metric_declarations(trainer->model_config()))
      out->declare_metric(m.name, m.unit, m.description);
  agreed([&] {
    if (ps.world_rank() == 0) write_file_atomic(deck_copy_path(cfg), resolved_deck_text(cfg));
  });
  int64_t done = 0;
  if (!resume_from.empty()) {
    done = trainer->restore(resume_from);  // collective; the files are checked on every rank first
    log_info("resuming from ", resume_from, " (step ", done, ")");
  }
  log_info(trainer->describe());
  const ValidationSettings& val = trainer->validation();
  if (val.enabled())
    log_info("validation: ", trainer->validation_problems(), " problems x ", val.generations, ", ",
             val.sampling.greedy ? std::string("greedy") : cat("temperature ", val.sampling.temperature), ", from ",
             val.path.empty() ? cat("data.task under validation.seed ", val.seed) : val.path,
             val.at_start ? ", at the start" : "", val.every > 0 ? cat(", every ", val.every, " steps") : "");
  if (out) log_info("output: ", out->path());
  // The trackers' sidecar follows the output file from here on (rank 0; io/tracker_sidecar.h).
  const std::unique_ptr<TrackerSidecar> trackers = out ? TrackerSidecar::start(cfg, out->path()) : nullptr;
  auto finish_trackers = [&] {
    if (trackers) trackers->finish(kTrackerFinishSeconds);
  };

  install_stop_handlers();
  auto checkpoint = [&](int64_t step) {
    const GrpoTrainer::Snapshot snap = trainer->snapshot();  // collective: a sharded optimizer gathers to rank 0
    std::string where;
    agreed([&] {
      if (ps.world_rank() == 0)
        where = save_checkpoint(copt, step, [&](const std::string& folder) {
                  trainer->save(folder, step, snap);
                  write_file_durable(folder + "/deck.json", record_json);
                }).path;
    });
    log_info("checkpoint: ", where.empty() ? copt.dir : where);
  };

  // A validation follows its step (and precedes the step's checkpoint, so a resumed run keeps it).
  auto validate = [&](int64_t step) {
    const Activity activity(cat("validating after step ", step));
    const StepRow vrow = trainer->validate(step);  // collective
    if (out) out->append_validation(vrow);
    print_rank0(format_validation_line(vrow, val.generations) + "\n");
  };
  if (done >= s.max_steps) {  // a resumed run that has already run its steps: nothing to do, said plainly
    log_info("hone: nothing to run: the checkpoint resumed from (", resume_from, ") is at step ", done,
             done == s.max_steps ? ", which is " : ", past ", "run.max_steps = ", s.max_steps,
             "; raise run.max_steps to train further");
    finish_trackers();
    return kExitOk;
  }
  if (val.at_start && done == 0) validate(0);
  print_rank0(step_line_header() + "\n");
  int64_t last_saved = done;
  for (int64_t step = done + 1; step <= s.max_steps; ++step) {
    // Every rank knows when samples are due (they are gathered from the ranks that generated them).
    const int64_t nsamples = s.sample_every > 0 && step % s.sample_every == 0 ? s.num_samples : 0;
    const Activity activity(cat("running GRPO step ", step));
    const StepRow row = trainer->step(step, nsamples);
    if (out) {
      for (const auto& [name, value] : row.values())  // the reward's sub-scores, named by the reward
        if (name.rfind("scores/", 0) == 0)
          out->declare_metric(name, "1", cat("mean of the reward's sub-score '", name.substr(7),
                                             "' over the step's rollouts that have it"));
      out->append(row);
    }
    print_rank0(format_step_line(row) + "\n");
    if (!trainer->step_note().empty()) print_rank0("         " + trainer->step_note() + "\n");
    if (val.due(step)) validate(step);
    if (s.checkpoint_every > 0 && step % s.checkpoint_every == 0) {
      checkpoint(step);
      last_saved = step;
    }
    if (stop_requested_on_any_rank()) {
      if (last_saved != step) checkpoint(step);
      const int sig = stop_signal();
      log_info("hone: stopped by ", stop_signal_name(sig), " after step ", step,
               "; checkpoint written; continue with run.resume=auto (exit code ", int(kExitInterrupted), ")");
      finish_trackers();
      note_exit_code_for_launcher(kExitInterrupted);
      return kExitInterrupted;
    }
  }
  if (s.checkpoint_at_exit && last_saved != s.max_steps && done < s.max_steps) checkpoint(s.max_steps);
  log_info("done: ", s.max_steps, " steps", out ? cat(", output in ", out->path()) : std::string());
  finish_trackers();
  return kExitOk;
}

const CommandRegistration run_reg{{"run", "run GRPO training as an input deck says", true, &run_run, kRunUsage}};

}  // namespace
}  // namespace hone::rl
