// The experiment trackers' sidecar: `hone run` starts tools/hone-log on rank 0 when the deck enables a tracker
// ([logger]: W&B, TensorBoard, MLflow), following the output file as the run flushes its rows. hone stays free of
// Python: the sidecar feeds the trackers through their own libraries. It runs in a process group of its own (a
// Ctrl-C meant for hone does not reach it), reads nothing from hone but the file, and learns that the run ended when
// its standard input (a pipe whose other end hone holds) closes, however hone ends, SIGKILL included. Its failure
// never stops training: hone says so in one line and goes on; hone-log's own output goes to its log file.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

namespace hone {
class Config;

class TrackerSidecar {
 public:
  // Starts hone-log for the run's output file `h5_path` when the deck enables a tracker; null otherwise, or when it
  // cannot be started (one warning line then). Never throws.
  static std::unique_ptr<TrackerSidecar> start(const Config& cfg, const std::string& h5_path);
  // Closes the pipe (the sidecar sends the last rows and exits) and waits up to wait_s seconds for it: one line
  // when it failed or is still running.
  void finish(double wait_s);
  ~TrackerSidecar();  // finish(0) when finish was not called
  TrackerSidecar(const TrackerSidecar&) = delete;
  TrackerSidecar& operator=(const TrackerSidecar&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_; }

 private:
  TrackerSidecar(pid_t pid, int pipe_fd, std::string log) : pid_(pid), pipe_(pipe_fd), log_(std::move(log)) {}
  pid_t pid_;
  int pipe_;  // our end of the sidecar's stdin; -1 once closed
  std::string log_;
  bool finished_ = false;
};

// The folder of the trackers' files: logger.log_dir, or <output.dir>/<run.name>.logs.
std::string tracker_log_dir(const Config& cfg);
// The trackers the deck enables, by name ("wandb", "tensorboard", "mlflow"); empty: none.
std::vector<std::string> enabled_trackers(const Config& cfg);
// hone-log's command line for the run's output file (script: the path of hone-log; pid: hone's).
std::vector<std::string> tracker_sidecar_argv(const Config& cfg, const std::string& script, const std::string& h5_path,
                                              pid_t pid);
// tools/hone-log as installed beside this executable: bin/hone-log (a bundle) or ../tools/hone-log (build/hone);
// empty when neither exists.
std::string find_hone_log_script();

}  // namespace hone
