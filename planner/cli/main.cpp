// lcm: plan long-context MoE training on H100/H200 clusters.
// Data goes to stdout, diagnostics to stderr. Exit codes: 0 ok, 1 failure, 2 bad input.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lcm/model/io/names.hpp"

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

// CLI11's errors as one line: "lcm: plan: --gpus: Value 0 not in range 1 to 1048576 (see
// lcm plan --help)".
std::string one_line_error(const CLI::App& app, const CLI::ParseError& e) {
  std::string where = "lcm";
  for (const CLI::App* a = &app;;) {
    const auto subs = a->get_subcommands();
    if (subs.empty()) break;
    a = subs.front();
    where += " " + a->get_name();
  }
  std::string what = e.what();
  for (char& c : what)
    if (c == '\n') c = ' ';
  while (!what.empty() && what.back() == ' ') what.pop_back();
  return fmt::format("lcm: {}{}{} (see {} --help)", where == "lcm" ? "" : where.substr(4), where == "lcm" ? "" : ": ",
                     what, where);
}

// "lcm frobnicate": name the commands instead of CLI11's "A subcommand is required".
std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  const std::string list = fmt::format("{}", fmt::join(names, ", "));
  if (argc < 2) return fmt::format("lcm: give a command: {} (see lcm --help)", list);
  const std::string first = argv[1];
  if (first.empty() || first[0] == '-' || std::find(names.begin(), names.end(), first) != names.end()) return std::nullopt;
  return "lcm: " + lcm::io::unknown_message("command", first, names) + "; commands: " + list;
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
  lcm::cli::register_compare(app, exit_code);
  lcm::cli::register_diff(app, exit_code);
  lcm::cli::register_export(app, exit_code);
  bool have_plot = false;
  for (const lcm::cli::Command& c : lcm::cli::registered_commands()) {
    c.add(app, exit_code);
    have_plot = have_plot || c.name == kPlot;
  }
  if (!have_plot) add_plot_unavailable(app, exit_code);
  if (const auto unknown = unknown_command(app, argc, argv)) {
    std::cerr << *unknown << "\n";
    return lcm::cli::kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << one_line_error(app, e) << "\n";
    return lcm::cli::kExitBadInput;
  }
  return exit_code;
}
