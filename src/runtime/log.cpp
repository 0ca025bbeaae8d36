// Logging: level filter, rank filter, "[rank r] " prefixes, one locked write per line.
#include "runtime/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "runtime/runtime.h"

namespace hone {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
std::atomic<bool> g_all_ranks{false};
std::mutex g_write_mutex;

// Without MPI (a command that does not start it, even under mpirun) the launcher's rank decides who logs.
int log_rank() {
  static const int launcher = launcher_rank();
  return mpi_active() ? world_rank() : launcher;
}

const char* tag(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug: ";
    case LogLevel::info: return "";
    case LogLevel::warn: return "warning: ";
    case LogLevel::error: return "error: ";
  }
  return "";
}
}  // namespace

LogLevel parse_log_level(const std::string& name) {
  for (LogLevel l : {LogLevel::debug, LogLevel::info, LogLevel::warn, LogLevel::error})
    if (name == log_level_name(l)) return l;
  throw UserError(cat("unknown log level '", name, "' (allowed: debug, info, warn, error)"));
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "?";
}

void set_log_level(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_log_all_ranks(bool on) { g_all_ranks = on; }
bool log_all_ranks() { return g_all_ranks; }

void configure_logging_from_env() {
  if (const char* v = std::getenv("HONE_LOG_LEVEL"); v && *v) {
    try {
      set_log_level(parse_log_level(v));
    } catch (const UserError& e) {
      throw UserError(cat("HONE_LOG_LEVEL: ", e.what()));
    }
  }
  if (const char* v = std::getenv("HONE_LOG_ALL_RANKS"); v && *v) {
    const std::string s = v;
    HONE_USER_CHECK(s == "0" || s == "1", "HONE_LOG_ALL_RANKS must be 0 or 1, not '", s, "'");
    set_log_all_ranks(s == "1");
  }
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load() && (g_all_ranks.load() || log_rank() == 0);
}

void log_line(LogLevel level, const std::string& message) {
  if (!log_enabled(level)) return;
  const std::string prefix = (g_all_ranks.load() ? cat("[rank ", log_rank(), "] ") : std::string()) + tag(level);
  std::string text;
  size_t begin = 0;
  while (true) {  // every line of a multi-line message carries the prefix
    const size_t end = message.find('\n', begin);
    text += prefix;
    text.append(message, begin, end == std::string::npos ? std::string::npos : end - begin);
    text += '\n';
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  std::FILE* out = level >= LogLevel::warn ? stderr : stdout;
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

}  // namespace hone
