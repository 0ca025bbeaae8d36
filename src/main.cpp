// The command line: `hone <command> [args...]`. Commands register themselves (runtime/command.h);
// this file finds the command, starts MPI when the command uses it, and turns exceptions into exit codes.
#include <cstdio>
#include <exception>
#include <optional>
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
    std::fprintf(stderr, "hone: error: unknown command '%s'\n\n", name.c_str());
    print_usage(stderr);
    return hone::kExitUserError;
  }
  std::vector<std::string> args(argv + 2, argv + argc);

  std::optional<hone::Runtime> runtime;
  try {
    if (cmd->uses_mpi) runtime.emplace(&argc, &argv);
    return cmd->run(args);
  } catch (const hone::UserError& e) {
    hone::fatal_exit(hone::kExitUserError, e.what(), /*collective=*/true);
  } catch (const std::exception& e) {
    hone::fatal_exit(hone::kExitFailure, e.what(), /*collective=*/false);
  }
}
