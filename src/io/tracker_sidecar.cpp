// Starting, and at the end waiting for, tools/hone-log: the trackers' sidecar of `hone run` (io/tracker_sidecar.h).
#include "io/tracker_sidecar.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "config/config.h"
#include "runtime/error.h"
#include "runtime/log.h"

extern char** environ;

namespace hone {
namespace fs = std::filesystem;

std::string tracker_log_dir(const Config& cfg) {
  const std::string dir = cfg.get_string("logger.log_dir");
  if (!dir.empty()) return dir;
  return cat(cfg.get_string("output.dir"), "/", cfg.get_string("run.name"), ".logs");
}

std::vector<std::string> enabled_trackers(const Config& cfg) {
  std::vector<std::string> names;
  if (cfg.get_bool("logger.wandb_enabled")) names.push_back("wandb");
  if (cfg.get_bool("logger.tensorboard_enabled")) names.push_back("tensorboard");
  if (cfg.get_bool("logger.mlflow_enabled")) names.push_back("mlflow");
  return names;
}

std::vector<std::string> tracker_sidecar_argv(const Config& cfg, const std::string& script, const std::string& h5_path,
                                              pid_t pid) {
  const std::string run_name = cfg.get_string("logger.run_name");
  std::vector<std::string> a{cfg.get_string("logger.python"), script, h5_path, "--follow", "--pid", cat(pid)};
  for (const std::string& t : enabled_trackers(cfg)) a.push_back("--" + t);
  const std::string dir = tracker_log_dir(cfg);
  a.insert(a.end(), {"--log-dir", dir, "--project", cfg.get_string("logger.project"), "--run-name",
                     run_name.empty() ? cfg.get_string("run.name") : run_name, "--wandb-mode",
                     cfg.get_string("logger.wandb_mode"), "--mlflow-tracking-uri",
                     cfg.get_string("logger.mlflow_tracking_uri"), "--log", dir + "/hone-log.txt"});
  for (const std::string& t : cfg.get_string_list("logger.tags")) a.insert(a.end(), {"--tag", t});
  return a;
}

std::string find_hone_log_script() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (const fs::path& p : {exe.parent_path() / "hone-log", exe.parent_path().parent_path() / "tools" / "hone-log"})
    if (fs::is_regular_file(p, ec)) return p.string();
  return {};
}

std::unique_ptr<TrackerSidecar> TrackerSidecar::start(const Config& cfg, const std::string& h5_path) {
  const std::vector<std::string> trackers = enabled_trackers(cfg);
  if (trackers.empty()) return nullptr;
  std::string names;
  for (const auto& t : trackers) names += (names.empty() ? "" : ", ") + t;
  auto refuse = [&](const std::string& why) -> std::unique_ptr<TrackerSidecar> {
    log_warn("logger: ", names, " get nothing: ", why, "; training goes on (tools/hone-log ", h5_path,
             " sends the rows later)");
    return nullptr;
  };
  const std::string script = find_hone_log_script();
  if (script.empty()) return refuse("tools/hone-log is neither beside this hone nor in ../tools");
  const std::string dir = tracker_log_dir(cfg);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return refuse(cat("cannot create logger.log_dir '", dir, "': ", ec.message()));
  const std::string log = dir + "/hone-log.txt";

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return refuse(cat("no pipe: ", std::strerror(errno)));
  const std::vector<std::string> argv_s = tracker_sidecar_argv(cfg, script, h5_path, getpid());
  std::vector<char*> argv;
  for (const auto& s : argv_s) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, fds[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  // Its own process group: a Ctrl-C at the terminal is hone's to handle (it finishes the step); signals default.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    return refuse(cat("cannot start logger.python = '", argv_s[0], "': ", std::strerror(rc)));
  }
  log_info("logger: tools/hone-log (pid ", pid, ") feeds ", names, " from ", h5_path, "; its files in ", dir,
           ", its log ", log);
  return std::unique_ptr<TrackerSidecar>(new TrackerSidecar(pid, fds[1], log));
}

void TrackerSidecar::finish(double wait_s) {
  if (finished_) return;
  finished_ = true;
  if (pipe_ >= 0) close(pipe_);
  pipe_ = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0) return;  // reaped elsewhere: nothing to say
    if (std::chrono::steady_clock::now() >= deadline) {
      if (wait_s > 0)
        log_info("logger: tools/hone-log (pid ", pid_, ") is still sending the last rows; it ends on its own (log ",
                 log_, ")");
      return;
    }
    const timespec pause{0, 20 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  // A non-zero exit has said why itself (one line on stderr); a signal has not.
  if (WIFSIGNALED(status))
    log_warn("logger: tools/hone-log was killed by signal ", WTERMSIG(status),
             ": the trackers may lack the last rows (the output file has them all; log ", log_, ")");
}

TrackerSidecar::~TrackerSidecar() { finish(0); }

}  // namespace hone
