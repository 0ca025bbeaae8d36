// Errors and check macros. Plain header (no MPI, CUDA or host-library includes) so .cu files may use it too.
//
// Two kinds of error, told apart by the exit code they end the run with:
//   UserError  something the user can fix (deck, file, argument): exit code 2, message without file:line
//   Error      an internal failure or a failed check: exit code 1, message names expression, file and line
// Code throws; main() (src/main.cpp) turns the exception into one message and the exit code on every rank.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hone {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // internal error, failed check, CUDA/NCCL/MPI failure
  kExitUserError = 2,    // bad deck, bad argument, missing input
  kExitInterrupted = 3,  // stopped by SIGTERM/SIGUSR1 after writing a checkpoint (resume with run.resume=auto)
};

namespace detail {
// The message with every NUL byte written as \x00: what() is read as a C string, so a NUL from the user's text
// (a path, a reply key) would cut the message short there.
std::string nul_safe(const std::string& message);
}  // namespace detail

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(detail::nul_safe(message)) {}
  explicit Error(const char* message) : std::runtime_error(message) {}
};

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(detail::nul_safe(message)) {}
  explicit UserError(const char* message) : std::runtime_error(message) {}
};

// cat("a", 1, 'b') == "a1b": message building for the macros below.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

namespace detail {
[[noreturn]] void check_failed(const char* kind, const char* expr, const char* file, int line, const std::string& detail);
// For the library-call checks (MPI_CHECK, CUDA_CHECK, ...): throws Error("<macro>(<expr>) failed: <reason> at file:line").
[[noreturn]] void call_failed(const char* macro, const char* expr, const std::string& reason, const char* file, int line);
}  // namespace detail

}  // namespace hone

// HONE_CHECK(cond, message parts...): throws hone::Error naming the expression, file and line.
#define HONE_CHECK(cond, ...)                                                                        \
  do {                                                                                               \
    if (!(cond)) ::hone::detail::check_failed("check", #cond, __FILE__, __LINE__, ::hone::cat(__VA_ARGS__)); \
  } while (0)

// HONE_USER_CHECK(cond, message parts...): throws hone::UserError with just the message.
#define HONE_USER_CHECK(cond, ...)                                  \
  do {                                                              \
    if (!(cond)) throw ::hone::UserError(::hone::cat(__VA_ARGS__)); \
  } while (0)
