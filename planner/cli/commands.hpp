// The `lcm` app's own subcommands (main.cpp adds them, then those of
// lcm/planner/cli/registry.hpp). Each callback sets the process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace lcm::cli {

void register_estimate(CLI::App& app, int& exit_code);
void register_scaling(CLI::App& app, int& exit_code);
void register_import(CLI::App& app, int& exit_code);
void register_capacity(CLI::App& app, int& exit_code);
void register_trace(CLI::App& app, int& exit_code);
void register_plan(CLI::App& app, int& exit_code);
void register_sweep(CLI::App& app, int& exit_code);
void register_comm(CLI::App& app, int& exit_code);
void register_calibrate(CLI::App& app, int& exit_code);
void register_compare(CLI::App& app, int& exit_code);
void register_diff(CLI::App& app, int& exit_code);
void register_export(CLI::App& app, int& exit_code);

}  // namespace lcm::cli
