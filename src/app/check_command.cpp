// `hone check deck.toml [key=value ...] [--ranks N] [--deck-only] [--echo-deck]`: the pre-flight of a run
// (rl/preflight.h) on the login node or as a job's first step, so that a deck a run would refuse is refused before the
// job waits in a queue. Under a launcher, rank 0 checks for the launcher's rank count and the others return at once.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/config.h"
#include "parallel/tp_check.h"
#include "rl/preflight.h"
#include "runtime/command.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/runtime.h"

namespace hone::rl {
namespace {

const char* const kCheckUsage =
    "usage: hone check deck.toml [key=value ...] [--ranks N] [--deck-only] [--echo-deck]\n"
    "  What `hone run` would refuse, found without loading weights: the deck's keys; every path it names (model\n"
    "  folder, config.json and weight files, tokenizer, data file readable; output and checkpoint folders writable\n"
    "  or creatable); the model's config.json against the tokenizer and the deck's lengths; the data's first rows;\n"
    "  the rank layout against the rank count and the model's dimensions; the batch sizes against the ranks. Prints\n"
    "  what it found and the memory planner's count per GPU rank. Exit 0: ready; 2: every problem, one line each.\n"
    "  --ranks N     check for N ranks (default: the launcher's rank count under mpirun/srun, else 1)\n"
    "  --deck-only   check the deck alone (keys, values, parallel.tp against a model that can be read): for a deck\n"
    "                written before its model or data are on this machine\n"
    "  --echo-deck   print the resolved deck (every key, with defaults) first; with --deck-only, only the deck\n";

// The rank count a launcher started, from its environment (no MPI needed); 0 when not under a launcher.
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    const char* v = std::getenv(name);
    if (v && *v && std::atoi(v) > 0) return std::atoi(v);
  }
  return 0;
}

int parse_ranks(const std::string& text) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  HONE_USER_CHECK(used == text.size() && n >= 1, "check: --ranks '", text, "' must be a positive integer");
  return n;
}

int run_check(const std::vector<std::string>& args) {
  if (launcher_rank() != 0) return kExitOk;  // one rank checks (and prints) for all
  std::string deck;
  std::vector<std::string> overrides;
  bool deck_only = false, echo_deck = false;
  int ranks = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--deck-only") {
      deck_only = true;
    } else if (a == "--echo-deck") {
      echo_deck = true;
    } else if (a == "--ranks") {
      HONE_USER_CHECK(i + 1 < args.size(), "check: --ranks needs a value (see hone check --help)");
      ranks = parse_ranks(args[++i]);
    } else if (a.rfind("--ranks=", 0) == 0) {
      ranks = parse_ranks(a.substr(8));
    } else if (a.rfind("--", 0) == 0) {
      throw UserError(cat("check: unknown option '", a, "' (see hone check --help)"));
    } else if (deck.empty() && a.find('=') == std::string::npos) {
      deck = a;
    } else {
      overrides.push_back(a);
    }
  }
  HONE_USER_CHECK(!deck.empty(), "check: no deck given (usage: hone check deck.toml [key=value ...] [--ranks N])");
  if (ranks == 0) ranks = launcher_size() > 0 ? launcher_size() : 1;

  const Config c = load_config(deck, overrides);
  if (echo_deck) std::fputs(c.to_toml().c_str(), stdout);
  if (deck_only) {
    // The model may not be on this machine yet: then only the deck is checked.
    const std::string unchecked = check_tp_fits_model(c);
    if (!unchecked.empty())
      log_warn("parallel.tp = ", c.get_int("parallel.tp"), " not checked against the model: ", unchecked);
    if (!echo_deck) std::printf("%s: the deck is valid (its files, model and layout not checked: --deck-only)\n",
                                deck.c_str());
    return kExitOk;
  }

  std::printf("hone check %s for %d rank%s\n", deck.c_str(), ranks, ranks == 1 ? "" : "s");
  const PreflightReport r = preflight(c, ranks);
  for (const auto& l : r.lines) std::printf("  %s\n", l.c_str());
  std::fflush(stdout);
  if (!r.problems.empty()) {
    std::string all;
    for (const auto& p : r.problems) all += (all.empty() ? "" : "\nhone: error: ") + p;
    throw UserError(all);
  }
  std::printf("ready: `hone run %s` passes these checks on %d rank%s\n", deck.c_str(), ranks, ranks == 1 ? "" : "s");
  return kExitOk;
}

const CommandRegistration check_reg{
    {"check", "pre-flight of a deck: its keys, paths, model, tokenizer, data, rank layout, memory", false,
     &run_check, kCheckUsage}};

}  // namespace
}  // namespace hone::rl
