// The lock of a folder a run writes in (see folder_lock.h).
#include "io/folder_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/one_line.h"

namespace hone {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// "key=value" lines of a lock file.
std::string field(const std::string& text, const std::string& key) {
  const std::string k = key + "=";
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    if (text.compare(at, k.size(), k) == 0) return text.substr(at + k.size(), end - at - k.size());
    at = end + 1;
  }
  return "";
}

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < 65536;) text.append(buf, size_t(n));
  return text;
}

std::string describe(const std::string& text) {
  if (field(text, "pid").empty()) return "another run (its lock file names no holder)";
  std::string d = cat("host ", field(text, "host"), ", pid ", field(text, "pid"));
  if (!field(text, "slurm_job_id").empty()) d += ", Slurm job " + field(text, "slurm_job_id");
  if (!field(text, "since").empty()) d += ", since " + field(text, "since");
  return one_line(d);
}

bool same_job(const std::string& text) {
  const std::string job = env("SLURM_JOB_ID");
  return !job.empty() && field(text, "slurm_job_id") == job;
}

// Without flock: whether the holder the file names is gone (this host, its pid not running) or is this job.
bool holder_gone_or_ours(const std::string& text) {
  if (field(text, "pid").empty() || same_job(text)) return true;
  if (field(text, "host") != host_name()) return false;
  const long pid = std::strtol(field(text, "pid").c_str(), nullptr, 10);
  if (pid <= 0 || pid == long(::getpid())) return true;
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

std::string FolderLock::holder_text() {
  std::string t = cat("host=", host_name(), "\npid=", ::getpid(), "\n");
  if (!env("SLURM_JOB_ID").empty()) t += "slurm_job_id=" + env("SLURM_JOB_ID") + "\n";
  return t + "since=" + now_text() + "\n";
}

FolderLock::FolderLock(const std::string& dir, const std::string& key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  HONE_USER_CHECK(!ec && fs::is_directory(dir), key, " '", dir, "': cannot create the folder",
                  ec ? cat(": ", ec.message()) : std::string(" (a file of that name is in the way)"));
  path_ = (fs::path(dir) / "hone.lock").string();
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  HONE_USER_CHECK(fd_ >= 0, key, " '", dir, "': cannot open its lock file ", path_, ": ", std::strerror(errno));
  const auto refuse = [&](const std::string& text) {
    ::close(fd_);
    fd_ = -1;
    throw UserError(cat(key, " '", dir, "' is in use by ", describe(text), " (", path_,
                        "): one run per folder; wait for it to end, or choose another ", key,
                        ". A run that was killed holds no lock; the same Slurm job (a requeue) waits up to ",
                        int(kRequeueWaitS), " s for its first copy"));
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kRequeueWaitS);
  bool waiting = false;
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EINTR) continue;
    const std::string text = read_all(fd_);
    if (e != EWOULDBLOCK) {  // no flock here (ENOLCK, EOPNOTSUPP ...): the file's content decides
      if (!holder_gone_or_ours(text)) refuse(text);
      break;
    }
    if (!same_job(text) || std::chrono::steady_clock::now() >= deadline) refuse(text);
    if (!waiting) {
      log_warn(key, " '", dir, "' is held by ", describe(text), ", a copy of this Slurm job: waiting up to ",
               int(kRequeueWaitS), " s for it to end");
      waiting = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const std::string me = holder_text();
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw UserError(cat(key, " '", dir, "': cannot write its lock file ", path_, ": ", std::strerror(e)));
  }
}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  // The content stays (the next holder rewrites it); the lock goes with the descriptor.
  [[maybe_unused]] const int rc = ::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace hone
