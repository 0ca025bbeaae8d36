// A child process with line exchanges under a deadline (see child_process.h).
#include "runtime/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "runtime/error.h"

extern char** environ;

namespace hone {

namespace {

using Clock = std::chrono::steady_clock;

// now + seconds. A wait longer than 30 years (reward.timeout_s = 1e10, 1e300) is 30 years: the clock's nanosecond
// count would overflow and the deadline lie in the past.
Clock::time_point deadline_after(double seconds) {
  const double s = std::min(std::max(seconds, 0.0), 1e9);
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
    throw Error(cat("fcntl(O_NONBLOCK) failed: ", std::strerror(errno)));
}

// SIGPIPE blocked in this thread while it writes to the child, so that a child gone away is an EPIPE, not the end
// of hone (SIGPIPE from write() goes to the writing thread). A SIGPIPE raised meanwhile is consumed before the old
// mask comes back.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    if (!sigismember(&old_, SIGPIPE)) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

std::string signal_text(int sig) {
  const char* name = ::strsignal(sig);
  return cat(sig, name ? cat(" (", name, ")") : std::string());
}

}  // namespace

ChildProcess::ChildProcess(const std::string& command, const std::vector<std::pair<std::string, std::string>>& extra_env,
                           size_t max_line_bytes)
    : command_(command), max_line_bytes_(max_line_bytes) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* p : {in, out, err}) close_fd(p[0]), close_fd(p[1]);
  };
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close_all();
    throw UserError(cat("cannot start `", command, "`: pipe() failed: ", std::strerror(e)));
  }

  // The environment: hone's, with extra_env set (replacing variables of the same name).
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    bool replaced = false;
    for (const auto& [k, v] : extra_env)
      if (std::strncmp(*e, k.c_str(), k.size()) == 0 && (*e)[k.size()] == '=') replaced = true;
    if (!replaced) env.emplace_back(*e);
  }
  for (const auto& [k, v] : extra_env) env.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};
  // fork and exec rather than posix_spawn, for the parent-death signal: a child that outlives hone (kill -9 of
  // hone, a crash) would otherwise go on, holding its files and GPUs. Between fork and exec the child calls only
  // async-signal-safe functions. The signal follows the thread that forks: children are started on the main
  // thread, which lives as long as hone.
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // its own process group, which hone ends with it: a shell's children too
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // hone died before the signal was armed
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    // Signals as a fresh program has them (hone's handlers and blocked SIGPIPE stay here).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGUSR1, SIGHUP, SIGQUIT, SIGXFSZ}) ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve("/bin/sh", argv, envp.data());
    ::_exit(127);
  }
  if (pid < 0) {
    const int e = errno;
    close_all();
    pid_ = -1;
    throw UserError(cat("cannot start `", command, "`: fork() failed: ", std::strerror(e)));
  }
  pid_ = pid;
  ::setpgid(pid_, pid_);  // also here, so that the group exists before hone may signal it
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  set_nonblocking(in_);
  set_nonblocking(out_);
  set_nonblocking(err_);
}

ChildProcess::~ChildProcess() {
  close_fd(in_);  // end of input: a well-behaved child exits now
  if (pid_ > 0 && !reap(3.0)) kill();
  close_fd(out_);
  close_fd(err_);
}

ChildProcess::Exchange ChildProcess::exchange(const std::string& data, size_t lines, double timeout_s) {
  Exchange x;
  const auto deadline = deadline_after(timeout_s);
  SigpipeBlock no_sigpipe;
  size_t written = 0;
  bool out_open = out_ >= 0;
  // Searches only the bytes not searched before and erases the lines taken at once: linear in the output however
  // it is split into reads and lines.
  auto take_lines = [&] {
    size_t begin = 0;
    while (x.lines.size() < lines) {
      const size_t from = begin + out_searched_;
      const size_t nl = out_buf_.find('\n', from);
      bytes_searched_ += (nl == std::string::npos ? out_buf_.size() : nl + 1) - from;
      if (nl == std::string::npos) {
        out_searched_ = out_buf_.size() - begin;
        break;
      }
      std::string line = out_buf_.substr(begin, nl - begin);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      x.lines.push_back(std::move(line));
      begin = nl + 1;
      out_searched_ = 0;
    }
    out_buf_.erase(0, begin);
  };
  take_lines();
  char buf[65536];
  while (x.lines.size() < lines) {
    if (out_buf_.size() > max_line_bytes_) {
      x.status = Status::line_too_long;
      return x;
    }
    if (!out_open) {
      x.status = Status::closed;
      return x;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      x.status = Status::timeout;
      return x;
    }
    pollfd fds[3];
    nfds_t n = 0;
    const bool writing = written < data.size() && in_ >= 0;
    fds[n++] = {out_, POLLIN, 0};
    if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
    if (writing) fds[n++] = {in_, POLLOUT, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    const int r = ::poll(fds, n, int(std::min<long long>(left + 1, 1000)));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw Error(cat("poll() on the pipes of `", command_, "` failed: ", std::strerror(errno)));
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_) {
        const ssize_t w = ::write(in_, data.data() + written, data.size() - written);
        if (w > 0) written += size_t(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR) close_fd(in_);  // EPIPE: the child is gone
      } else if (fds[i].fd == out_) {
        const ssize_t got = ::read(out_, buf, sizeof buf);
        if (got > 0) {
          out_buf_.append(buf, size_t(got));
          take_lines();
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          out_open = false;
        }
      } else if (fds[i].fd == err_) {
        const ssize_t got = ::read(err_, buf, sizeof buf);
        if (got > 0) take_stderr(buf, size_t(got));
        else if (got == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(err_);
      }
    }
  }
  return x;
}

bool ChildProcess::pending_output() {
  if (!out_buf_.empty()) return true;
  if (out_ < 0) return false;
  char buf[65536];
  const ssize_t got = ::read(out_, buf, sizeof buf);
  if (got > 0) out_buf_.append(buf, size_t(got));
  return !out_buf_.empty();
}

std::string ChildProcess::pending_line(size_t max_bytes) {
  std::string line = out_buf_.substr(0, out_buf_.find('\n'));
  if (line.size() > max_bytes) line = line.substr(0, max_bytes) + "...";
  return line;
}

void ChildProcess::take_stderr(const char* data, size_t n) {
  constexpr size_t kKeepLines = 200, kMaxLine = 4000;
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == '\n') {
      err_lines_.push_back(std::move(err_partial_));
      err_partial_.clear();
      if (err_lines_.size() > kKeepLines) err_lines_.pop_front();
    } else if (err_partial_.size() < kMaxLine) {
      err_partial_ += data[i];
    }
  }
}

void ChildProcess::drain_stderr() {
  char buf[65536];
  while (err_ >= 0) {
    const ssize_t got = ::read(err_, buf, sizeof buf);
    if (got > 0) take_stderr(buf, size_t(got));
    else if (got == 0 || (errno != EAGAIN && errno != EINTR)) close_fd(err_);
    else break;
  }
}

std::string ChildProcess::stderr_tail(size_t max_lines, size_t max_bytes, const std::string& prefix) {
  drain_stderr();
  std::vector<std::string> all(err_lines_.begin(), err_lines_.end());
  if (!err_partial_.empty()) all.push_back(err_partial_);
  while (!all.empty() && all.back().find_first_not_of(" \t\r") == std::string::npos) all.pop_back();
  std::string out;
  size_t taken = 0, bytes = 0;
  for (size_t i = all.size(); i-- > 0 && taken < max_lines;) {
    std::string line = all[i];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (bytes + line.size() > max_bytes && taken > 0) break;
    if (line.size() > max_bytes) line = "..." + line.substr(line.size() - max_bytes);
    out = prefix + line + (out.empty() ? "" : "\n") + out;
    bytes += line.size();
    ++taken;
  }
  return out;
}

bool ChildProcess::reap(double wait_s) {
  if (ended_) return true;
  if (pid_ <= 0) return false;
  const auto deadline = deadline_after(wait_s);
  while (true) {
    // Seen ended but not yet reaped: its id stays taken, so its process group can be ended without any risk of
    // hitting another's, then it is reaped. A shell's background children (`cmd &`) end with it.
    siginfo_t info{};
    const int w = ::waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && info.si_pid == pid_) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      if (::waitpid(pid_, &status, 0) == pid_) status_ = status;
      ended_ = true;
      return true;
    }
    if (w < 0 && errno != EINTR) return false;  // not our child any more (someone else reaped it)
    if (Clock::now() >= deadline) return false;
    drain_stderr();  // a child blocked on a full stderr pipe would never end
    const timespec pause{0, 5000000};  // 5 ms
    nanosleep(&pause, nullptr);
  }
}

std::string ChildProcess::exit_description(double wait_s) {
  if (!reap(wait_s)) return "is still running";
  if (WIFEXITED(status_)) return cat("exited with status ", WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return cat("was killed by signal ", signal_text(WTERMSIG(status_)));
  return "ended";
}

void ChildProcess::kill() {
  if (pid_ <= 0 || ended_) return;
  ::kill(-pid_, SIGKILL);  // the group: a shell's children too
  ::kill(pid_, SIGKILL);
  reap(10.0);
}

}  // namespace hone
