// The subcommands of the hone executable (hone run | check | help | tokenize | logprobs | bench ...).
// Each layer registers its own command in its own file with a static CommandRegistration, so main.cpp
// never changes when a command is added:
//
//   static const hone::CommandRegistration reg{{"tokenize", "text to token ids and back", false, &run_tokenize, kUsage}};
//
// `hone <command> --help` (or -h, anywhere in the arguments) and `hone help <command>` print the command's usage
// text and exit 0 before the command (or MPI) starts, so every command has the same help without parsing it.
#pragma once

#include <string>
#include <vector>

namespace hone {

struct Command {
  std::string name;
  std::string summary;  // one line for `hone help`
  bool uses_mpi;        // MPI is initialized before the command runs (multi-rank commands)
  int (*run)(const std::vector<std::string>& args);  // args after the command name; returns the exit code
  const char* usage;    // "usage: hone <name> ..." then what the arguments mean; printed by --help
};

struct CommandRegistration {
  explicit CommandRegistration(Command c);
};

const std::vector<Command>& commands();  // sorted by name
const Command* find_command(const std::string& name);

// `hone` alone, `hone --help`, `hone help`: the version line, the usage line and every command with its summary.
std::string program_usage();
// The command's usage text, ending with a newline.
std::string command_help(const Command& c);
// True when args ask for help: "--help" or "-h" among them.
bool asks_for_help(const std::vector<std::string>& args);
// "bench, bench-generation, check, ..., version": the commands named in one line (for an unknown command).
std::string command_names();

}  // namespace hone
