// The subcommands of the hone executable (hone run | check | help | tokenize | logprobs | bench ...).
// Each layer registers its own command in its own file with a static CommandRegistration, so main.cpp
// never changes when a command is added:
//
//   static const hone::CommandRegistration reg{{"tokenize", "text to token ids and back", false, &run_tokenize}};
#pragma once

#include <string>
#include <vector>

namespace hone {

struct Command {
  std::string name;
  std::string summary;  // one line for `hone help`
  bool uses_mpi;        // MPI is initialized before the command runs (multi-rank commands)
  int (*run)(const std::vector<std::string>& args);  // args after the command name; returns the exit code
};

struct CommandRegistration {
  explicit CommandRegistration(Command c);
};

const std::vector<Command>& commands();  // sorted by name
const Command* find_command(const std::string& name);

}  // namespace hone
