// Reading the host memory a process may still take from /proc and the cgroup file system (see the header).
#include "runtime/host_memory.h"

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hone {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value in kB of a "Name:   1234 kB" line of a /proc file, as bytes; -1 when absent.
double kb_field(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, name.size() + 1, name + ":") != 0) continue;
    const char* p = line.c_str() + name.size() + 1;
    char* end = nullptr;
    const double kb = std::strtod(p, &end);
    return end == p ? -1 : kb * 1024.0;
  }
  return -1;
}

// Room left under the cgroup limits along this process's cgroup path (the smallest over the path's levels);
// -1 when no limit is set or the files are not there.
double cgroup_room(std::string* which) {
  const std::string self = read_text("/proc/self/cgroup");
  double best = -1;
  std::istringstream lines(self);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    const bool v1 = !v2 && (controllers == "memory" || controllers.find("memory,") == 0 ||
                            controllers.find(",memory") != std::string::npos);
    if (!v1 && !v2) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    const std::string limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
    const std::string usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
    while (true) {
      const std::string dir = root + (path == "/" ? "" : path);
      const double limit = detail::cgroup_number(read_text(dir + "/" + limit_file));
      const double usage = detail::cgroup_number(read_text(dir + "/" + usage_file));
      // cgroup v1 writes "no limit" as a page-rounded INT64_MAX.
      if (limit > 0 && limit < 4.0e18 && usage >= 0 && (best < 0 || limit - usage < best)) {
        best = limit - usage;
        *which = v2 ? "the cgroup's memory.max" : "the cgroup's memory.limit_in_bytes";
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return best;
}

}  // namespace

namespace detail {

double meminfo_available_bytes(const std::string& meminfo) {
  const double avail = kb_field(meminfo, "MemAvailable");
  if (avail < 0) return -1;
  const double swap = kb_field(meminfo, "SwapFree");
  return avail + (swap > 0 ? swap : 0);
}

double cgroup_number(const std::string& text) {
  if (text.empty() || text.compare(0, 3, "max") == 0) return -1;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end == text.c_str() ? -1 : v;
}

}  // namespace detail

HostMemory available_host_memory() {
  HostMemory m;
  m.bytes = detail::meminfo_available_bytes(read_text("/proc/meminfo"));
  m.limit = "MemAvailable + SwapFree of /proc/meminfo";
  std::string which;
  const double room = cgroup_room(&which);
  if (room >= 0 && (m.bytes < 0 || room < m.bytes)) m.bytes = room, m.limit = which;
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const double vm = kb_field(read_text("/proc/self/status"), "VmSize");
    const double left = double(as.rlim_cur) - (vm > 0 ? vm : 0);
    if (m.bytes < 0 || left < m.bytes) m.bytes = left < 0 ? 0 : left, m.limit = "the address-space limit (ulimit -v)";
  }
  return m;
}

}  // namespace hone
