// Durable and atomic file writing (see atomic_file.h). POSIX calls, because std::ofstream cannot fsync.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace fs = std::filesystem;

namespace hone {

namespace {

[[noreturn]] void io_failed(const char* what, const std::string& path, int err) {
  throw UserError(cat("cannot ", what, " '", path, "': ", std::strerror(err)));
}

std::string parent_of(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

void fsync_fd(int fd, const std::string& path) {
  // EINVAL/ENOTSUP: the file system does not support fsync on this kind of descriptor; nothing more can be done.
  if (::fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
    int err = errno;
    ::close(fd);
    io_failed("fsync", path, err);
  }
}

}  // namespace

std::string atomic_temp_path(const std::string& path) { return cat(path, ".tmp-", ::getpid()); }

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_failed("open", path, errno);
  fsync_fd(fd, path);
  ::close(fd);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_failed("open folder", dir, errno);
  fsync_fd(fd, dir);
  ::close(fd);
}

void rename_durable(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) io_failed(cat("rename '", from, "' to").c_str(), to, errno);
  const std::string to_dir = parent_of(to), from_dir = parent_of(from);
  fsync_dir(to_dir);
  if (fs::path(from_dir).lexically_normal() != fs::path(to_dir).lexically_normal()) fsync_dir(from_dir);
}

void write_file_durable(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_failed("create", path, errno);
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      io_failed("write", path, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  fsync_fd(fd, path);
  if (::close(fd) != 0) io_failed("close", path, errno);
}

void write_file_atomic_with(const std::string& path, const std::function<void(const std::string& tmp_path)>& writer) {
  const std::string tmp = atomic_temp_path(path);
  try {
    writer(tmp);
    fsync_path(tmp);
    rename_durable(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);  // best effort: never leave our temp file behind after a failure we saw
    throw;
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic_with(path, [&](const std::string& tmp) { write_file_durable(tmp, content); });
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_failed("read", path, errno ? errno : ENOENT);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace hone
