// The registry of subcommands added to the `lcm` app by other libraries.
#include "lcm/planner/cli/registry.hpp"

#include <algorithm>
#include <cassert>

namespace lcm::cli {

namespace {

// Function-local: registrations run during static initialisation, in any order with
// respect to this file's own statics.
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

ComparePlotter& plotter() {
  static ComparePlotter p = nullptr;
  return p;
}

}  // namespace

bool register_command(std::string name, AddCommand add) {
  assert(add != nullptr);
  std::vector<Command>& r = registry();
  assert(std::none_of(r.begin(), r.end(), [&](const Command& c) { return c.name == name; }));
  r.push_back(Command{std::move(name), add});
  return true;
}

const std::vector<Command>& registered_commands() { return registry(); }

bool register_compare_plotter(ComparePlotter plot) {
  assert(plot != nullptr && plotter() == nullptr);
  plotter() = plot;
  return true;
}

ComparePlotter compare_plotter() { return plotter(); }

}  // namespace lcm::cli
