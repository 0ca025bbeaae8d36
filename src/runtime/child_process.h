// A child process spoken to in lines over its stdin and stdout, with a deadline on every exchange: hone writes the
// request lines and reads the reply lines at the same time (one poll over stdin, stdout and stderr), so neither
// side's full pipe can deadlock the other, and a child that stops answering costs at most the timeout, never a hang.
// The child runs `/bin/sh -c <command>` in its own process group (a Ctrl-C or SIGTERM meant for hone does not
// reach it: hone finishes its step first) and is ended with its whole group. Its stderr is read all along (a chatty
// child never blocks) and its last lines are kept for error messages.
//
//   ChildProcess p("python3 reward.py", {{"HONE_RANK", "0"}});
//   ChildProcess::Exchange x = p.exchange(requests, n_lines, 60.0);
//   if (x.status != ChildProcess::Status::ok) throw UserError(cat("... ", p.exit_description(), p.stderr_tail()));
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace hone {

class ChildProcess {
 public:
  // Starts the child (UserError when it cannot be started at all: no /bin/sh, no pipes). A command that does not
  // exist is found out at the first exchange: the shell exits with status 127 and says so on stderr.
  ChildProcess(const std::string& command, const std::vector<std::pair<std::string, std::string>>& extra_env,
               size_t max_line_bytes = size_t(16) << 20);
  // Closes the child's stdin (its cue to exit), waits up to a few seconds, then ends its process group.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  enum class Status {
    ok,             // every line asked for arrived
    timeout,        // the deadline passed first
    closed,         // the child closed its stdout (it exited, most likely) before every line arrived
    line_too_long,  // a line grew past max_line_bytes without a newline
  };
  struct Exchange {
    Status status = Status::ok;
    std::vector<std::string> lines;  // the complete lines received (all of them when ok), without '\n' (or "\r\n")
  };
  // Writes `data` to the child's stdin while reading its stdout, until `lines` complete lines have arrived or
  // timeout_s seconds have passed. Bytes after the last line asked for stay buffered (see pending_output()).
  Exchange exchange(const std::string& data, size_t lines, double timeout_s);

  // Output the child wrote that no exchange asked for: buffered bytes, and whatever is readable right now.
  bool pending_output();
  // The first buffered line that no exchange asked for (for messages), cut to max_bytes.
  std::string pending_line(size_t max_bytes = 200);

  // What became of the child, waiting up to wait_s for it to end: "exited with status 1", "was killed by signal 9
  // (Killed)", or "is still running" (it is then ended when this object goes).
  std::string exit_description(double wait_s = 2.0);
  // The last lines the child wrote to stderr (up to max_lines lines, max_bytes bytes), each prefixed with
  // prefix; empty when it wrote nothing. Reads what is readable first.
  std::string stderr_tail(size_t max_lines = 20, size_t max_bytes = 4000, const std::string& prefix = "  | ");
  // Ends the child's process group now (SIGKILL) and reaps it.
  void kill();

  pid_t pid() const { return pid_; }
  const std::string& command() const { return command_; }
  // Bytes of stdout examined in search of line ends so far: each byte once however the line arrives (a 15 MiB
  // line in 64 KiB reads was searched from its start at every read, quadratic), for tests.
  uint64_t bytes_searched() const { return bytes_searched_; }

 private:
  void drain_stderr();
  void take_stderr(const char* data, size_t n);
  bool reap(double wait_s);  // true when the child has ended (status_ holds how)

  std::string command_;
  size_t max_line_bytes_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;  // our ends: the child's stdin, stdout, stderr
  std::string out_buf_;                // stdout bytes not yet handed out as lines
  size_t out_searched_ = 0;            // the first bytes of out_buf_, known to hold no '\n'
  uint64_t bytes_searched_ = 0;
  std::deque<std::string> err_lines_;  // the last stderr lines
  std::string err_partial_;            // a stderr line still growing
  bool ended_ = false;
  int status_ = 0;  // waitpid's status once ended_
};

}  // namespace hone
