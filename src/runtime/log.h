// Logging with levels. By default only rank 0 writes (without MPI: the launcher's rank 0, see launcher_rank()); with all-ranks logging on, every rank writes and each line
// starts with "[rank r] ". debug and info go to stdout, warn and error to stderr; every line is written whole
// (thread safe). Lines: info as is, the others tagged "debug: ", "warning: ", "error: ".
// Settings come from $HONE_LOG_LEVEL (debug|info|warn|error, default info) and $HONE_LOG_ALL_RANKS=1, read by
// run_guarded(); the deck may change them later with set_log_level / set_log_all_ranks.
//
//   hone::log_info("step ", step, " reward ", r);
//   hone::log_warn("clip fraction ", f, " is high");
#pragma once

#include <string>

#include "runtime/error.h"

namespace hone {

enum class LogLevel : int { debug = 0, info = 1, warn = 2, error = 3 };

LogLevel parse_log_level(const std::string& name);  // "debug" | "info" | "warn" | "error"; else UserError
const char* log_level_name(LogLevel level);

void set_log_level(LogLevel level);  // lines below this level are dropped
LogLevel log_level();
void set_log_all_ranks(bool on);
bool log_all_ranks();
void configure_logging_from_env();  // $HONE_LOG_LEVEL, $HONE_LOG_ALL_RANKS; UserError on a bad value

bool log_enabled(LogLevel level);  // at or above the level, and this rank writes
void log_line(LogLevel level, const std::string& message);  // writes when log_enabled(level)

template <typename... Args>
void log_debug(const Args&... args) {
  if (log_enabled(LogLevel::debug)) log_line(LogLevel::debug, cat(args...));
}
template <typename... Args>
void log_info(const Args&... args) {
  if (log_enabled(LogLevel::info)) log_line(LogLevel::info, cat(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_enabled(LogLevel::warn)) log_line(LogLevel::warn, cat(args...));
}
template <typename... Args>
void log_error(const Args&... args) {
  if (log_enabled(LogLevel::error)) log_line(LogLevel::error, cat(args...));
}

}  // namespace hone
