// How much host memory this process may still take: the smallest of what the kernel has available
// (/proc/meminfo MemAvailable + SwapFree), what the process's cgroup still allows (memory.max - memory.current of
// cgroup v2, or memory.limit_in_bytes - memory.usage_in_bytes of cgroup v1: a Slurm job's --mem), and what the
// address-space limit leaves (ulimit -v, RLIMIT_AS, less the process's VmSize). Read by the host memory planner
// (rl/host_memory_plan.h) before the model is allocated. Plain header.
#pragma once

#include <string>

namespace hone {

struct HostMemory {
  double bytes = -1;   // < 0: unknown (no /proc), the planner then checks nothing
  std::string limit;   // what the number is: "MemAvailable + SwapFree", "the cgroup's memory.max", "ulimit -v"
};

HostMemory available_host_memory();

namespace detail {
// The parts, from the files' text (tests): MemAvailable + SwapFree of /proc/meminfo (kB), -1 when absent.
double meminfo_available_bytes(const std::string& meminfo);
// A cgroup limit file's number ("max" or a bad text: -1).
double cgroup_number(const std::string& text);
}  // namespace detail

}  // namespace hone
