// Shared pieces of the `lcm` subcommands: scenario loading with --set / --gpus / --hw,
// output format parsing, atomic output files, and exit codes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lcm/model/specs.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // could not write output, internal failure
inline constexpr int kExitBadInput = 2;  // bad scenario, flag or value

// Options every scenario-reading command shares.
struct ScenarioOptions {
  std::string path;
  std::vector<std::string> sets;  // KEY=VALUE
  int gpus = 0;                   // for Megatron model_config.yaml inputs
  std::string hw;                 // likewise
};
void add_scenario_options(CLI::App& cmd, ScenarioOptions& o);

// Loads and validates; on error prints the one-line message to stderr and returns nullopt.
std::optional<Scenario> load_or_report(const ScenarioOptions& o);

struct OutputOptions {
  std::string format = "table";
  std::string output;  // empty: stdout
};
void add_output_options(CLI::App& cmd, OutputOptions& o, const std::vector<std::string>& formats);
report::Format parse_format(const std::string& f);

// Writes to stdout, or to `path` atomically (temporary file in the same directory, then
// rename). Returns false after printing the reason to stderr.
bool write_output(const std::string& path, const std::string& text);

// "4K,32K,128K,1M" -> {4096, 32768, 131072, 1048576}; error text on bad input.
std::optional<std::vector<int64_t>> parse_size_list(const std::string& text, std::string* error);

}  // namespace lcm::cli
