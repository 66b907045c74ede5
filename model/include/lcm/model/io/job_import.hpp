// Import the jobs `lcm export` writes (and hand-written ones of the same form), next to the
// Megatron-LM importer (megatron_import.hpp):
//
//  * A Megatron-Bridge (NeMo 2) ConfigContainer override YAML (sections model:, train:,
//    dataset:, ddp:, optimizer:, mixed_precision:). Its keys are Megatron-Core field names,
//    so it becomes Megatron flags (field `tensor_model_parallel_size` -> flag
//    `--tensor-model-parallel-size`, plus the few renamed fields) and goes through the
//    Megatron importer: same defaults (Megatron-Core's, not a recipe's), same checks.
//  * A TorchTitan TOML job config (the TOML-era JobConfig: [training], [parallelism],
//    [activation_checkpoint], [model] converters). A TorchTitan TOML names its model by
//    flavor only, so the architecture comes from a scenario (`--model`); the job and the
//    layout come from the TOML. The TOML is read by a small strict reader of the subset
//    lcm writes (toml_read.hpp): anything else is an error at file:line.
#pragma once

#include <string>
#include <vector>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/io/megatron_import.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::io {

// Megatron-Bridge YAML -> Megatron flags (for import_megatron_report). Keys lcm does not
// read are listed in `unread` ("checkpoint", "model.activation_func", ...).
Result<std::vector<MegatronFlag>> parse_megatron_bridge_yaml(const std::string& yaml_text,
                                                             const std::string& display_name,
                                                             std::vector<std::string>* unread);

// TorchTitan TOML + the model of a scenario -> a validated scenario. `notes` of the report
// say what was approximated, `ignored_flags` the keys without effect on cost.
Result<MegatronImportReport> import_torchtitan(const std::string& toml_text, const std::string& display_name,
                                               const ModelSpec& model, int num_gpus, const HardwareSpec& hardware,
                                               const std::string& name);

}  // namespace lcm::io
