// `lcm import megatron`: a Megatron-LM command line or functional-test model_config.yaml
// in, a scenario YAML out.
#include "commands.hpp"

#include <iostream>
#include <regex>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "lcm/model/limits.hpp"
#include "lcm/planner/cli/common.hpp"

namespace lcm::cli {

namespace {

struct ImportOptions {
  // One file with a command line or a model_config.yaml ("-" = stdin), or the Megatron
  // flags themselves after "--".
  std::vector<std::string> args;
  std::string input;
  int gpus = 0;
  std::string hw;
  std::string name;
  std::string output;
};

}  // namespace

void register_import(CLI::App& app, int& exit_code) {
  auto* imp = app.add_subcommand("import", "Import a configuration from another tool");
  imp->require_subcommand(1);
  auto* cmd = imp->add_subcommand(
      "megatron", "Megatron-LM command line (--flag value ...) or functional-test model_config.yaml -> scenario YAML");
  auto o = std::make_shared<ImportOptions>();
  cmd->add_option("input", o->args,
                  "File holding a Megatron command line or a model_config.yaml ('-' for stdin); or the flags "
                  "themselves after '--'");
  cmd->add_option("--gpus", o->gpus, "Number of GPUs of the job")->required()->check(CLI::Range(int64_t{1}, limits::kNumGpus));
  cmd->add_option("--hw", o->hw, "Hardware profile name or path (e.g. h200-sxm)")->required();
  cmd->add_option("--name", o->name, "Scenario name (default: the input file name)");
  cmd->add_option("-o,--output", o->output, "Write the scenario to FILE (atomically) instead of stdout")
      ->check(output_path_validator());
  cmd->callback([o, &exit_code] {
    exit_code = kExitBadInput;
    std::string text, display;
    bool yaml = false;
    const bool is_file = o->args.size() == 1 && (o->args[0] == "-" || o->args[0].rfind("-", 0) != 0);
    if (is_file) o->input = o->args[0];
    if (is_file) {
      display = o->input;
      if (o->input == "-") display = "<stdin>";
      auto read = o->input == "-" ? io::read_input_stream(std::cin, display, "the Megatron input")
                                  : io::read_input_file(o->input, "the Megatron input");
      if (!read) {
        std::cerr << "lcm: " << read.error().str() << "\n";
        return;
      }
      text = std::move(read).value();
      // A model_config.yaml has a "MODEL_ARGS:" block (a launch script may have MODEL_ARGS=( ... )).
      yaml = std::regex_search(text, std::regex("(^|\n)MODEL_ARGS[ \t]*:"));
    } else {
      display = "<command line>";
      for (const std::string& f : o->args) text += (text.empty() ? "" : " ") + f;
      if (text.empty()) {
        std::cerr << "lcm: import megatron: give an input file or the Megatron flags after '--'\n";
        return;
      }
    }
    auto flags = yaml ? io::parse_megatron_model_config(text, display)
                      : io::parse_megatron_command_line(text, display);
    if (!flags) {
      std::cerr << "lcm: " << flags.error().str() << "\n";
      return;
    }
    auto path = io::find_hardware_profile(o->hw, {});
    if (!path) {
      std::cerr << "lcm: " << path.error().str() << "\n";
      return;
    }
    auto hw = io::load_hardware_profile(path.value());
    if (!hw) {
      std::cerr << "lcm: " << hw.error().str() << "\n";
      return;
    }
    std::string name = o->name;
    if (name.empty()) name = o->input.empty() || o->input == "-" ? "imported" : o->input;
    auto r = io::import_megatron_report(flags.value(), o->gpus, hw.value(), name);
    if (!r) {
      std::cerr << "lcm: " << r.error().str() << "\n";
      return;
    }
    // What the scenario cannot carry is said, never dropped silently.
    for (const std::string& n : r.value().notes) std::cerr << "lcm: note: " << n << "\n";
    if (!r.value().ignored_flags.empty()) {
      std::cerr << "lcm: note: ignored (no effect on cost):";
      for (const std::string& f : r.value().ignored_flags) std::cerr << " " << f;
      std::cerr << "\n";
    }
    exit_code = write_output(o->output, io::scenario_to_yaml(r.value().scenario, o->hw)) ? kExitOk : kExitFailure;
  });
}

}  // namespace lcm::cli
