// Subcommands that other libraries add to the `lcm` app. The app registers its own
// (estimate, plan, ...) itself; a library linked into the `lcm` executable adds one by
// registering it during static initialisation, e.g. gui/'s `plot` where Qt6 is found:
//
//   const bool kRegistered = lcm::cli::register_command("plot", add_plot_command);
//
// main() adds the registered commands after its own, in registration order.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lcm/planner/report/compare_report.hpp"

namespace lcm::cli {

// Adds one subcommand to `app`; its callback sets `exit_code` (kExitOk, kExitFailure,
// kExitBadInput of lcm/planner/cli/common.hpp).
using AddCommand = void (*)(CLI::App& app, int& exit_code);

struct Command {
  std::string name;  // the subcommand's name, unique
  AddCommand add = nullptr;
};

// Registers `add` under `name`; returns true (for use as a static initialiser).
// Precondition: no command of that name is registered.
bool register_command(std::string name, AddCommand add);

// The registered commands, in registration order.
const std::vector<Command>& registered_commands();

// `lcm compare --plots DIR`: writes the comparison's PNG charts into DIR (created if
// missing); false with the reason in `error`. gui/ registers it where Qt6 is found; without
// it --plots is refused.
using ComparePlotter = bool (*)(const report::Comparison& c, const std::string& dir, std::string* error);
// Returns true (for use as a static initialiser). Precondition: none registered yet.
bool register_compare_plotter(ComparePlotter plot);
ComparePlotter compare_plotter();  // nullptr when none is registered

}  // namespace lcm::cli
