// The command line: `hone <command> [args...]`. Commands register themselves (runtime/command.h);
// this file finds the command, answers --help for every command, starts MPI when the command uses it, and turns
// exceptions into exit codes. An error is always the last line printed: what a user reads first in a job log.
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/version.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    if (hone::launcher_rank() == 0) {
      std::fputs(hone::program_usage().c_str(), stderr);
      std::fputs("hone: error: no command given\n", stderr);
    }
    return hone::kExitUserError;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    std::fputs(hone::program_usage().c_str(), stdout);
    return hone::kExitOk;
  }
  if (name == "version" || name == "--version") {
    std::printf("hone %s (commit %s)\n", hone::version(), hone::git_commit());
    return hone::kExitOk;
  }
  const hone::Command* cmd = hone::find_command(name);
  if (!cmd) {
    if (hone::launcher_rank() == 0)  // once, not once per rank under mpirun/srun
      std::fprintf(stderr, "hone: error: unknown command '%s' (commands: %s; `hone help` describes them)\n",
                   name.c_str(), hone::command_names().c_str());
    return hone::kExitUserError;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (hone::asks_for_help(args)) {  // before MPI starts: help needs no ranks
    if (hone::launcher_rank() == 0) std::fputs(hone::command_help(*cmd).c_str(), stdout);
    return hone::kExitOk;
  }
  // MPI starts only for commands that use it; errors end every rank with one message (runtime/runtime.h).
  return hone::run_guarded(cmd->uses_mpi, &argc, &argv, [&] { return cmd->run(args); });
}
