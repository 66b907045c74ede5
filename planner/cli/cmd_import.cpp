// `lcm import megatron|nemo|torchtitan`: a Megatron-LM command line, functional-test
// model_config.yaml or launch script; a Megatron-Bridge override YAML; or a TorchTitan TOML
// in, a scenario YAML out.
#include "commands.hpp"

#include <iostream>
#include <optional>
#include <regex>

#include "lcm/model/io/input_file.hpp"
#include "lcm/model/io/job_import.hpp"
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

// The hardware profile of --hw; nullopt after printing the error.
std::optional<HardwareSpec> load_hw(const std::string& hw) {
  auto path = io::find_hardware_profile(hw, {});
  if (!path) {
    std::cerr << "lcm: " << path.error().str() << "\n";
    return std::nullopt;
  }
  auto spec = io::load_hardware_profile(path.value());
  if (!spec) {
    std::cerr << "lcm: " << spec.error().str() << "\n";
    return std::nullopt;
  }
  return std::move(spec).value();
}

// Notes and ignored inputs on stderr, then the scenario YAML out.
int write_report(const io::MegatronImportReport& r, const ImportOptions& o, const char* ignored_what) {
  // What the scenario cannot carry is said, never dropped silently.
  for (const std::string& n : r.notes) std::cerr << "lcm: note: " << n << "\n";
  if (!r.ignored_flags.empty()) {
    std::cerr << "lcm: note: " << ignored_what << ":";
    for (const std::string& f : r.ignored_flags) std::cerr << " " << f;
    std::cerr << "\n";
  }
  return write_output(o.output, io::scenario_to_yaml(r.scenario, o.hw)) ? kExitOk : kExitFailure;
}

// `lcm import nemo FILE` and `lcm import torchtitan FILE --model SCENARIO`.
void add_job_import(CLI::App& imp, bool titan, int& exit_code) {
  auto* cmd =
      titan ? imp.add_subcommand("torchtitan", "TorchTitan TOML job config (+ --model SCENARIO) -> scenario YAML")
            : imp.add_subcommand("nemo", "Megatron-Bridge (NeMo 2) ConfigContainer override YAML -> scenario YAML");
  auto o = std::make_shared<ImportOptions>();
  auto model = std::make_shared<std::string>();
  cmd->add_option("input", o->input, titan ? "TorchTitan .toml job config" : "Megatron-Bridge override .yaml")
      ->required();
  cmd->add_option("--gpus", o->gpus, "Number of GPUs of the job")
      ->required()
      ->check(in_range(int64_t{1}, limits::kNumGpus));
  cmd->add_option("--hw", o->hw, "Hardware profile name or path (e.g. h200-sxm)")->required();
  if (titan)
    cmd->add_option("--model", *model,
                    "Scenario whose model: section is the flavor's architecture (a TorchTitan TOML "
                    "names the model, it does not describe it)")
        ->required();
  cmd->add_option("--name", o->name, "Scenario name (default: the input file name)");
  cmd->add_option("-o,--output", o->output, "Write the scenario to FILE (atomically) instead of stdout")
      ->check(output_path_validator());
  cmd->callback([o, model, titan, &exit_code] {
    exit_code = kExitBadInput;
    auto text = io::read_input_file(o->input, titan ? "the TorchTitan config" : "the Megatron-Bridge YAML");
    if (!text) {
      std::cerr << "lcm: " << text.error().str() << "\n";
      return;
    }
    const auto hw = load_hw(o->hw);
    if (!hw) return;
    const std::string name = o->name.empty() ? o->input : o->name;
    if (titan) {
      auto base = io::load_scenario(*model);
      if (!base) {
        std::cerr << "lcm: --model: " << base.error().str() << "\n";
        return;
      }
      auto r = io::import_torchtitan(text.value(), o->input, base.value().model, o->gpus, *hw, name);
      if (!r) {
        std::cerr << "lcm: " << r.error().str() << "\n";
        return;
      }
      exit_code = write_report(r.value(), *o, "not read (no effect on cost)");
      return;
    }
    std::vector<std::string> unread;
    auto flags = io::parse_megatron_bridge_yaml(text.value(), o->input, &unread);
    if (!flags) {
      std::cerr << "lcm: " << flags.error().str() << "\n";
      return;
    }
    auto r = io::import_megatron_report(flags.value(), o->gpus, *hw, name);
    if (!r) {
      std::cerr << "lcm: " << r.error().str() << "\n";
      return;
    }
    io::MegatronImportReport rep = std::move(r).value();
    rep.ignored_flags.insert(rep.ignored_flags.end(), unread.begin(), unread.end());
    exit_code = write_report(rep, *o, "not read (no effect on cost)");
  });
}

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
  cmd->add_option("--gpus", o->gpus, "Number of GPUs of the job")
      ->required()
      ->check(in_range(int64_t{1}, limits::kNumGpus));
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
    auto flags = yaml ? io::parse_megatron_model_config(text, display) : io::parse_megatron_command_line(text, display);
    if (!flags) {
      std::cerr << "lcm: " << flags.error().str() << "\n";
      return;
    }
    const auto hw = load_hw(o->hw);
    if (!hw) return;
    std::string name = o->name;
    if (name.empty()) name = o->input.empty() || o->input == "-" ? "imported" : o->input;
    auto r = io::import_megatron_report(flags.value(), o->gpus, *hw, name);
    if (!r) {
      std::cerr << "lcm: " << r.error().str() << "\n";
      return;
    }
    exit_code = write_report(r.value(), *o, "ignored (no effect on cost)");
  });
  add_job_import(*imp, false, exit_code);
  add_job_import(*imp, true, exit_code);
}

}  // namespace lcm::cli
