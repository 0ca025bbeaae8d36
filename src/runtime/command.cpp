// Registry of subcommands, filled by static CommandRegistration objects before main() runs, and the help texts
// built from it.
#include "runtime/command.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/version.h"

namespace hone {

static std::vector<Command>& registry() {
  static std::vector<Command> r;  // function-local: safe against static initialization order
  return r;
}

CommandRegistration::CommandRegistration(Command c) {
  auto& r = registry();
  r.push_back(std::move(c));
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
}

const std::vector<Command>& commands() { return registry(); }

const Command* find_command(const std::string& name) {
  for (const auto& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

std::string program_usage() {
  std::string s = cat("hone ", version(), ": GRPO post-training of language models\n\nusage: hone <command> [args...]\n\ncommands:\n");
  auto line = [&](const std::string& name, const std::string& summary) {
    std::string n = name;
    if (n.size() < 16) n.resize(16, ' ');
    s += cat("  ", n, " ", summary, "\n");
  };
  for (const auto& c : registry()) line(c.name, c.summary);
  line("version", "print the version and git commit");
  s += "\n`hone <command> --help` or `hone help <command>` describes a command; `hone help deck` prints the input\n"
       "deck reference (`--markdown` for doc/deck.md).\n";
  return s;
}

std::string command_help(const Command& c) {
  std::string s = c.usage ? c.usage : cat("usage: hone ", c.name, "\n");
  if (s.empty() || s.back() != '\n') s += '\n';
  return s;
}

bool asks_for_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

std::string command_names() {
  std::string s;
  for (const auto& c : registry()) s += c.name + ", ";
  return s + "version";
}

}  // namespace hone
