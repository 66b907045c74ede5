// `lcm export`: one estimated layout written as a job the target framework runs.
//
//   megatron    a bash launch script for Megatron-LM's pretrain_gpt.py (torchrun or srun);
//   nemo        a Megatron-Bridge ConfigContainer override YAML (model:, train:, ddp:, ...);
//   torchtitan  a TorchTitan TOML job config (the TOML-era JobConfig).
//
// Every knob of the scenario is written, or said in a comment where the target has no
// switch for it and what the target runs is the same; where the target would run something
// else (TorchTitan has no ZeRO-1, no Ulysses CP, ...) the export fails with the reason, so
// an exported file always runs the layout lcm estimated (docs/export.md).
#pragma once

#include <string>
#include <variant>

#include "lcm/model/specs.hpp"

namespace lcm::cli {

enum class ExportTarget { kMegatron, kNemo, kTorchTitan };

// What the header comments say about where the job came from.
struct ExportSource {
  std::string scenario;  // the scenario argument as given
  std::string layout;  // --layout, "" when none
};

// The file's text, or a one-line reason why the target cannot express the layout.
struct ExportError {
  std::string message;
};
std::variant<std::string, ExportError> export_job(const Scenario& s, ExportTarget target, const ExportSource& src);

}  // namespace lcm::cli
