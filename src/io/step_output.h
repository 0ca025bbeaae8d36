// The run's output file <output.dir>/<run.name>.h5, written by rank 0 (see doc/output.md for its contents):
//   /steps/<metric>  one float64 element per step (/steps/step: the step numbers, int64); '/' in a metric name
//                    makes nested groups (/steps/time/generation); every dataset carries `unit` and `description`
//   /samples/{step,prompt,completion,reward}   a few samples every output.sample_every steps
//   /rollouts/step_<N>  every rollout of step N (output.rollouts = "all"): an external link to its own file
//   /validation/<metric>  one float64 element per validation (/validation/step: the steps it followed, int64)
//   root attributes  the resolved deck, version, git commit, ranks, GPUs, start time
//
// The history lives in memory; after every step the whole file is written to a temporary sibling, fsynced and
// renamed over the final name. A reader (h5py while the run goes) always sees a complete file, and a crash or a
// kill at any moment leaves the previous complete file. Rewriting is cheap: thousands of steps x ~60 metrics.
//
//   hone::StepOutput out(hone::StepOutputOptions::from_config(cfg, resume_step, world_size, gpus));
//   hone::StepRow row(step);
//   row.set("time/generation", 1.5);           // unit and description from the catalog (io/output_metrics.h)
//   if (out.sample_due(step)) row.add_sample(prompt, completion, reward);
//   out.append(row);                            // file rewritten, flushed, renamed
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hone {

class Config;
struct RolloutTable;

struct OutputSample {
  int64_t step = 0;
  std::string prompt, completion;  // UTF-8
  double reward = 0.0;
};

// One step's metrics and samples, filled by the loop and handed to StepOutput::append and format_step_line.
class StepRow {
 public:
  explicit StepRow(int64_t step) : step_(step) {}
  int64_t step() const { return step_; }
  // Sets a metric's value for this step (a valid metric name other than "step"; setting twice replaces).
  void set(const std::string& metric, double value);
  std::optional<double> get(const std::string& metric) const;
  const std::map<std::string, double>& values() const { return values_; }
  void add_sample(std::string prompt, std::string completion, double reward);
  const std::vector<OutputSample>& samples() const { return samples_; }
  // Every rollout of the step (output.rollouts = "all"): written to its own file, linked from /rollouts.
  void set_rollouts(std::shared_ptr<const RolloutTable> rollouts) { rollouts_ = std::move(rollouts); }
  const std::shared_ptr<const RolloutTable>& rollouts() const { return rollouts_; }

 private:
  int64_t step_;
  std::map<std::string, double> values_;
  std::vector<OutputSample> samples_;
  std::shared_ptr<const RolloutTable> rollouts_;
};

struct StepOutputOptions {
  std::string dir = "out";        // output.dir
  std::string run_name = "hone";  // run.name: the file is <dir>/<run_name>.h5
  bool overwrite = false;         // output.overwrite
  // >= 0: resuming from the checkpoint of this step: rows after it are dropped. run.resume=auto without a
  // checkpoint to resume from: 0 (a file left by a run killed before its first checkpoint is emptied of its rows).
  int64_t resume_step = -1;
  int64_t sample_every = 0;       // output.sample_every (0: never)
  // Resuming into an output.dir other than the checkpoint's: the file may be missing (it then starts after the
  // checkpoint's step, which the resume history says). Otherwise a missing file is refused.
  bool new_output_dir = false;
  std::string resume_note;        // resuming: appended to the resume history's line ("changed: a 1 -> 2, ...")
  std::string deck_toml;          // the resolved deck (Config::to_toml())
  int64_t num_ranks = 1;
  std::string gpus = "none";      // e.g. "8 x NVIDIA H100 80GB HBM3"

  static StepOutputOptions from_config(const Config& c, int64_t resume_step, int64_t num_ranks,
                                       const std::string& gpus);
};

class StepOutput {
 public:
  // Checks that output.dir can be written (UserError naming output.dir), refuses an existing file unless
  // overwrite or resuming (UserError naming the file and output.overwrite), loads and truncates the history when
  // resuming, and writes the file once (the attributes, and the kept history) before returning.
  explicit StepOutput(StepOutputOptions options);

  const std::string& path() const { return path_; }
  const StepOutputOptions& options() const { return opt_; }

  // Unit and description of a metric that is not in the catalog (or to replace the catalog's words).
  void declare_metric(const std::string& name, const std::string& unit, const std::string& description);

  // Whether this step stores samples (sample_every > 0 and step % sample_every == 0).
  bool sample_due(int64_t step) const;

  // Adds one step (its step number must exceed every earlier one) and rewrites the file. Metrics seen for the first
  // time are back-filled with NaN for earlier steps; metrics known but absent from the row get NaN. A row with
  // rollouts has them written first to <dir>/<run_name>.rollouts/step_<N>.h5 (io/rollout_file.h), then linked.
  void append(const StepRow& row);
  // Adds one validation (row.step(): the steps trained before it, 0 before the first; increasing) to /validation
  // and rewrites the file. Units from the validation catalog (io/output_metrics.h); its samples are not stored.
  void append_validation(const StepRow& row);

  // The history as written (after resume: as loaded and truncated).
  const std::vector<int64_t>& steps() const { return steps_.steps; }
  int64_t last_step() const { return steps_.steps.empty() ? -1 : steps_.steps.back(); }
  std::vector<std::string> metric_names() const;
  const std::vector<double>& metric(const std::string& name) const;  // hone::Error for an unknown name
  const std::vector<OutputSample>& samples() const { return samples_; }
  const std::vector<int64_t>& rollout_steps() const { return rollout_steps_; }  // steps linked under /rollouts
  const std::string& start_time() const { return start_time_; }
  // The validations as written (after resume: as loaded and truncated).
  const std::vector<int64_t>& validation_steps() const { return validation_.steps; }
  const std::vector<double>& validation_metric(const std::string& name) const;  // hone::Error for an unknown name

 private:
  struct Series {
    std::string unit, description;
    std::vector<double> values;
  };
  // One group of the file: a step column and one series per metric, all of its length.
  struct Table {
    std::string group;  // "steps" or "validation"
    std::vector<int64_t> steps;
    std::map<std::string, Series> metrics;
  };
  void check_output_dir() const;
  void load_for_resume();
  // Removes the rollout files of steps after `after` (all of them when after < 0): another run's, or steps a
  // resume drops.
  void check_rollout_folder() const;  // UserError when it is a symbolic link
  void remove_rollout_files(int64_t after) const;
  void load_table(int64_t file, Table& t, int64_t keep_through);
  void add_metric(Table& t, const std::string& name);
  void append_row(Table& t, const StepRow& row);
  void write_file() const;
  void write_contents(int64_t file) const;  // an hid_t (int64_t), without hdf5.h in this header

  StepOutputOptions opt_;
  std::string path_;
  std::string start_time_;      // of the first run that wrote this file
  std::string resume_history_;  // "step <N> at <time>" lines, one per resume
  Table steps_{"steps", {}, {}};
  Table validation_{"validation", {}, {}};
  std::map<std::string, std::pair<std::string, std::string>> declared_;
  std::vector<OutputSample> samples_;
  std::vector<int64_t> rollout_steps_;
};

// The current time as ISO 8601 UTC: "2026-11-22T02:30:00Z".
std::string iso8601_utc_now();

}  // namespace hone
