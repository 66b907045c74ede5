// lcm: plan long-context MoE training on H100/H200 clusters.
// Data goes to stdout, diagnostics to stderr. Exit codes: 0 ok, 1 failure, 2 bad input.
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "lcm/planner/cli/common.hpp"
#include "lcm/planner/cli/registry.hpp"

namespace {

// `lcm plot` comes from gui/ (registered where Qt6 is found). Without it the command still
// exists, says why it cannot run, and exits with 2.
constexpr const char* kPlot = "plot";
void add_plot_unavailable(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(kPlot, "Render a chart to PNG/SVG (needs lcm built with Qt6)");
  cmd->allow_extras();
  cmd->callback([&exit_code] {
    std::cerr << "lcm: plot: lcm was built without Qt6 (install qt6-base-dev qt6-charts-dev qt6-svg-dev and "
                 "rebuild with -DLCM_BUILD_GUI=ON)\n";
    exit_code = lcm::cli::kExitBadInput;
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lcm: analytical cost model and planner for long-context MoE training on H100/H200"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lcm 0.1.0");
  int exit_code = lcm::cli::kExitOk;
  lcm::cli::register_estimate(app, exit_code);
  lcm::cli::register_scaling(app, exit_code);
  lcm::cli::register_import(app, exit_code);
  lcm::cli::register_capacity(app, exit_code);
  lcm::cli::register_trace(app, exit_code);
  lcm::cli::register_plan(app, exit_code);
  lcm::cli::register_sweep(app, exit_code);
  lcm::cli::register_comm(app, exit_code);
  lcm::cli::register_calibrate(app, exit_code);
  bool have_plot = false;
  for (const lcm::cli::Command& c : lcm::cli::registered_commands()) {
    c.add(app, exit_code);
    have_plot = have_plot || c.name == kPlot;
  }
  if (!have_plot) add_plot_unavailable(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return lcm::cli::kExitBadInput;
  }
  return exit_code;
}
