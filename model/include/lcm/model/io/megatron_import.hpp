// Import what users run today: a Megatron-LM command line (`--flag value` form,
// `--flag=value` too; unrelated flags such as data paths are accepted and ignored only
// if they are known Megatron flags that do not affect cost) or a Megatron
// functional-test model_config.yaml (its MODEL_ARGS block). Missing architecture flags
// take Megatron-LM's argument defaults, as Megatron itself would.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::io {

// One flag as given: name without leading dashes ("tensor-model-parallel-size") and its
// value ("" for a bare boolean flag), with where it came from for error messages.
// An environment variable of the job that changes what it runs (Transformer Engine's
// NVTE_FUSED_ATTN and NVTE_FLASH_ATTN: kEnvVariables) is carried as a flag named
// kEnvFlagPrefix + NAME with its value.
struct MegatronFlag {
  std::string name;
  std::string value;
  std::string file;
  int line = 0;
  int column = 0;
};
inline constexpr std::string_view kEnvFlagPrefix = "env:";
// A Megatron-Bridge config field with no Megatron-LM flag, carried to the importer under its
// dotted name (parse_megatron_bridge_yaml): "bridge:optimizer.store_param_remainders".
inline constexpr std::string_view kBridgeFieldPrefix = "bridge:";
inline constexpr std::string_view kEnvVariables[] = {"NVTE_FUSED_ATTN", "NVTE_FLASH_ATTN"};

// Split a command line (shell-like quoting, backslash-newline continuations, a leading
// `torchrun ... pretrain_gpt.py` prefix skipped) into flags; kEnvVariables assigned anywhere in
// the text (`export NAME=V`, `NAME=V torchrun ...`) become env flags.
Result<std::vector<MegatronFlag>> parse_megatron_command_line(const std::string& text,
                                                              const std::string& display_name);
// Read the MODEL_ARGS block of a functional-test model_config.yaml, and kEnvVariables from its
// ENV_VARS block as env flags.
Result<std::vector<MegatronFlag>> parse_megatron_model_config(const std::string& yaml_text,
                                                              const std::string& display_name);

// Build a validated scenario from flags, a GPU count and a hardware profile.
Result<Scenario> import_megatron(const std::vector<MegatronFlag>& flags, int num_gpus,
                                 const HardwareSpec& hardware, const std::string& name);

// The same import plus what the importer did not take over one to one, for `lcm import` to
// show: `notes` lists approximations and flags that change cost but that lcm does not model
// (e.g. "--attention-output-gate: the attention output gate ... is not counted");
// `ignored_flags` lists the known Megatron flags without effect on cost (data
// paths, logging, checkpointing, learning-rate schedule, ...).
struct MegatronImportReport {
  Scenario scenario;
  std::vector<std::string> notes;
  std::vector<std::string> ignored_flags;
};
Result<MegatronImportReport> import_megatron_report(const std::vector<MegatronFlag>& flags, int num_gpus,
                                                    const HardwareSpec& hardware, const std::string& name);

}  // namespace lcm::io
