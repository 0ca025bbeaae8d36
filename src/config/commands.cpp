// `hone check deck.toml [key=value ...]`: validate a deck (parallel.tp against the model it names too) and print it
// resolved.
// `hone help [deck [--markdown]]`: usage, the list of commands, the deck reference.
#include <cstdio>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/deck_reference.h"
#include "parallel/tp_check.h"
#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/version.h"

namespace hone {
namespace {

int run_check(const std::vector<std::string>& args) {
  if (args.empty()) throw UserError("check: no deck given (usage: hone check deck.toml [key=value ...])");
  if (args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: hone check deck.toml [key=value ...]\n"
                "Validates the deck with the overrides (parallel.tp against the model's shape when its config.json can\n"
                "be read) and prints the resolved deck (every key, with defaults).\n");
    return kExitOk;
  }
  const Config c = load_config(args[0], std::vector<std::string>(args.begin() + 1, args.end()));
  // The model may not be on this machine yet (a deck written ahead of a job): then only the deck is checked.
  const std::string unchecked = check_tp_fits_model(c);
  if (!unchecked.empty())
    log_warn("parallel.tp = ", c.get_int("parallel.tp"), " not checked against the model: ", unchecked);
  std::fputs(c.to_toml().c_str(), stdout);
  return kExitOk;
}

void print_usage() {
  std::printf("hone %s: GRPO post-training of language models\n\nusage: hone <command> [args...]\n\ncommands:\n",
              version());
  for (const auto& c : commands()) std::printf("  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("  %-10s %s\n", "version", "print the version and git commit");
  std::printf("\n`hone help deck` prints the input deck reference (`--markdown` for doc/deck.md).\n");
}

int run_help(const std::vector<std::string>& args) {
  if (args.empty()) {
    print_usage();
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
  throw UserError(cat("help: unknown topic '", args[0], "' (topics: deck)"));
}

const CommandRegistration check_reg{{"check", "validate an input deck and print it resolved", false, &run_check}};
const CommandRegistration help_reg{{"help", "usage, commands, and `help deck`: the input deck reference", false, &run_help}};

}  // namespace
}  // namespace hone
