// The command line: `hone <command> [args...]`. Commands register themselves (runtime/command.h);
// this file finds the command, starts MPI when the command uses it, and turns exceptions into exit codes.
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/runtime.h"
#include "runtime/version.h"

namespace {

void print_usage(std::FILE* f) {
  std::fprintf(f, "hone %s: GRPO post-training of language models\n\nusage: hone <command> [args...]\n\ncommands:\n",
               hone::version());
  for (const auto& c : hone::commands()) std::fprintf(f, "  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(f, "  %-10s %s\n", "version", "print the version and git commit");
  std::fprintf(f, "\n`hone help deck` prints the input deck reference.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return hone::kExitUserError;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    print_usage(stdout);
    return hone::kExitOk;
  }
  if (name == "version" || name == "--version") {
    std::printf("hone %s (commit %s)\n", hone::version(), hone::git_commit());
    return hone::kExitOk;
  }
  const hone::Command* cmd = hone::find_command(name);
  if (!cmd) {
    if (hone::launcher_rank() == 0) {  // once, not once per rank under mpirun/srun
      std::fprintf(stderr, "hone: error: unknown command '%s'\n\n", name.c_str());
      print_usage(stderr);
    }
    return hone::kExitUserError;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  // MPI starts only for commands that use it; errors end every rank with one message (runtime/runtime.h).
  return hone::run_guarded(cmd->uses_mpi, &argc, &argv, [&] { return cmd->run(args); });
}
