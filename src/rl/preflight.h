// `hone check`'s pre-flight of a deck: what `hone run` would refuse, found before a job waits in a queue and without
// loading anything big. Every path the deck names exists and can be read (model folder, its config.json and weight
// files, tokenizer, data file) or written (output and checkpoint folders, created by the run when missing); the
// weight files' headers hold every parameter of config.json's model with its shape; the model against the deck
// (vocabulary, positions, stop tokens); the tokenizer loads; the data's first rows parse; the rank layout fits the
// rank count and the model's dimensions; the loop's batch sizes divide. The memory planner's per-rank count is
// reported. No tensor is read (the weight files are mapped for their headers), nothing is allocated on a device.
#pragma once

#include <string>
#include <vector>

namespace hone {
class Config;
}

namespace hone::rl {

struct PreflightReport {
  std::vector<std::string> lines;     // what was checked and found, one line each ("model      ...")
  std::vector<std::string> problems;  // one line each, naming the deck key and where it is written
};

// Rows of the data file parsed (the whole file is scanned by `hone run`).
constexpr int kPreflightDataRows = 8;

// Checks the deck c as `hone run` on `ranks` ranks would use it. Never throws UserError: every refusal becomes a
// problem, and the checks that do not depend on a failed one still run.
PreflightReport preflight(const Config& c, int ranks);

}  // namespace hone::rl
