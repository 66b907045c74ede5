// `lcm export megatron|nemo|torchtitan SCENARIO`: the scenario's layout (or --layout's) as
// a job the framework runs (export_job.hpp).
#include <iostream>
#include <variant>

#include "commands.hpp"
#include "export_job.hpp"
#include "lcm/planner/cli/common.hpp"

namespace lcm::cli {

namespace {

void add_target(CLI::App& exp, const char* name, const char* what, ExportTarget target, int& exit_code) {
  auto* cmd = exp.add_subcommand(name, what);
  auto so = std::make_shared<ScenarioOptions>();
  auto output = std::make_shared<std::string>();
  add_scenario_options(*cmd, *so);
  cmd->add_option("-o,--output", *output, "Write to FILE (atomically) instead of stdout")
      ->check(output_path_validator());
  cmd->callback([so, output, target, name, &exit_code] {
    const auto s = load_or_report(*so);
    if (!s) {
      exit_code = kExitBadInput;
      return;
    }
    auto r = export_job(*s, target, ExportSource{so->path, so->layout});
    if (const auto* e = std::get_if<ExportError>(&r)) {
      std::cerr << "lcm: export " << name << ": cannot express this layout: " << e->message << "\n";
      exit_code = kExitBadInput;
      return;
    }
    exit_code = write_output(*output, std::get<std::string>(r)) ? kExitOk : kExitFailure;
  });
}

}  // namespace

void register_export(CLI::App& app, int& exit_code) {
  auto* exp =
      app.add_subcommand("export", "Write a scenario's layout as a runnable job (Megatron-LM, NeMo, TorchTitan)");
  exp->require_subcommand(1);
  add_target(*exp, "megatron", "Bash launch script for Megatron-LM pretrain_gpt.py (torchrun and srun)",
             ExportTarget::kMegatron, exit_code);
  add_target(*exp, "nemo", "Megatron-Bridge (NeMo 2) ConfigContainer override YAML", ExportTarget::kNemo, exit_code);
  add_target(*exp, "torchtitan", "TorchTitan TOML job config", ExportTarget::kTorchTitan, exit_code);
}

}  // namespace lcm::cli
