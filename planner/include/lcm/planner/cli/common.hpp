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
  int gpus = 0;                   // replaces hardware.num_gpus (and gives a Megatron model_config.yaml's)
  std::string hw;                 // likewise hardware.profile
  std::string layout;             // --layout "tp1 cp16(p2p) pp2 ..." (plan::parse_layout_string)
};
void add_scenario_options(CLI::App& cmd, ScenarioOptions& o);

// Loads and validates, with the --layout applied (plan::apply_layout) when one is given; on
// error prints the one-line message to stderr and returns nullopt.
std::optional<Scenario> load_or_report(const ScenarioOptions& o);

// The --layout of `o` applied to `base` and checked (validate_scenario); on error prints
// "lcm: --layout "...": ..." and returns nullopt.
std::optional<Scenario> apply_layout_option(const Scenario& base, const std::string& layout);

struct OutputOptions {
  std::string format = "table";
  std::string output;  // empty: stdout
};
void add_output_options(CLI::App& cmd, OutputOptions& o, const std::vector<std::string>& formats);
report::Format parse_format(const std::string& f);

// Writes to stdout, or to `path`: a regular file (new or existing, through symlinks) is
// replaced atomically (temporary file in the same directory, then rename) keeping an
// existing file's mode and, where allowed, its owner; the temporary file is removed on
// INT/TERM/HUP. Anything else (a device, a FIFO) is written in place. Returns false after
// printing the reason to stderr.
bool write_output(const std::string& path, const std::string& text);
// Checks an -o path when the command line is read, before any work: its directory must exist
// and be a directory, and the path must not be one ("" and "-" are standard output). A bad
// path is a usage error (exit 2) naming the directory; write_output still reports what only
// writing can find (permissions, a full disk).
CLI::Validator output_path_validator();

// A number option's range check with lcm's own message, the same whatever CLI11's version:
// "Value 0 not in range [1, 1048576]" (CLI11 2.3 and 2.4 word their CLI::Range differently).
CLI::Validator in_range(double lo, double hi);

// Measured per-expert loads (capacity --loads, plot capacity --loads): the file read with
// io::read_input_file, parsed by report::parse_expert_loads, each load at most
// limits::kExpertLoad; error text on bad input.
std::optional<std::vector<double>> read_expert_loads(const std::string& path, std::string* error);

// "4K,32K,128K,1M" -> {4096, 32768, 131072, 1048576}, each in [1, cap], at most
// limits::kListEntries entries; error text on bad input.
std::optional<std::vector<int64_t>> parse_size_list(const std::string& text, int64_t cap, std::string* error);

}  // namespace lcm::cli
