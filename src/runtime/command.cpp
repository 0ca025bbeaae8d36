// Registry of subcommands, filled by static CommandRegistration objects before main() runs.
#include "runtime/command.h"

#include <algorithm>

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

}  // namespace hone
