// `hone help [<command> | deck [--markdown]]`: usage and the list of commands, one command's usage, or the deck
// reference.
#include <cstdio>
#include <string>
#include <vector>

#include "config/deck_reference.h"
#include "runtime/command.h"
#include "runtime/error.h"

namespace hone {
namespace {

const char* const kHelpUsage =
    "usage: hone help [<command> | deck [--markdown]]\n"
    "  (nothing)         the commands, one line each\n"
    "  <command>         that command's usage (the same as `hone <command> --help`)\n"
    "  deck              the input deck reference: every section and key, its type, default, range and meaning\n"
    "  deck --markdown   the same as Markdown (doc/deck.md is made from it)\n";

int run_help(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(program_usage().c_str(), stdout);
    return kExitOk;
  }
  if (args[0] == "deck") {
    if (args.size() == 1) {
      std::fputs(deck_reference_text().c_str(), stdout);
      return kExitOk;
    }
    if (args.size() == 2 && args[1] == "--markdown") {
      std::fputs(deck_reference_markdown().c_str(), stdout);
      return kExitOk;
    }
    throw UserError(cat("help deck: unexpected argument '", args.back(), "' (usage: hone help deck [--markdown])"));
  }
  HONE_USER_CHECK(args.size() == 1, "help: unexpected argument '", args[1], "' (usage: hone help [<command> | deck])");
  if (const Command* c = find_command(args[0])) {
    std::fputs(command_help(*c).c_str(), stdout);
    return kExitOk;
  }
  if (args[0] == "version") {
    std::fputs("usage: hone version\n  Prints the version and the git commit hone was built from.\n", stdout);
    return kExitOk;
  }
  throw UserError(cat("help: unknown topic '", args[0], "' (topics: deck, ", command_names(), ")"));
}

const CommandRegistration help_reg{
    {"help", "usage, `help <command>`, and `help deck`: the input deck reference", false, &run_help, kHelpUsage}};

}  // namespace
}  // namespace hone
