// Private: the steps every scenario input goes through after its own parser (scenario YAML
// or Megatron flags): --set overrides, derived defaults, validate_scenario, and the mapping
// of each problem's key back to where the user wrote it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/io/scenario_loader.hpp"
#include "scenario_fields.hpp"
#include "yaml_read.hpp"

namespace lcm::io {

// Where each key of a scenario came from.
struct KeyLocations {
  Loc document;                                // file:1:1 of the input
  std::map<std::string, Loc> keys;             // dotted key -> its position ("--set" for overrides)
  std::map<std::string, std::string> display;  // dotted key -> how the input spelled it (Megatron flag)
  std::map<std::string, Loc> sections;         // "model" -> position of `model:`
};

// The error for a dotted key, placed at the key, at the key that implies it (derived
// defaults), at its section, or at the document.
ConfigError error_for_key(const KeyLocations& where, const std::string& dotted, std::string message);

// Apply KEY=VALUE overrides (section.key, a unique bare key, or model.rope_scaling.<sub>);
// values are read as YAML scalars/flow collections and go through the same field parsers.
// Megatron names of field_aliases() are rewritten first (a virtual stage count becomes
// layers per virtual stage on the final layer count and pipeline size). Keys that depend on
// an overridden one follow it unless overridden too: tp_comm_overlap and sequence_parallel
// turn off when tensor_model_parallel_size becomes 1; recompute_num_layers becomes 1 when
// recompute_granularity becomes full and null when it leaves full. What was adjusted is
// added to `notes` as one line. Errors name the override ("--set KEY=VALUE").
std::optional<ConfigError> apply_overrides(const std::vector<Override>& overrides, ScenarioDraft& d,
                                           KeyLocations& where, std::vector<std::string>* notes = nullptr);

// Required keys, Megatron's derived defaults (num_query_groups = heads, kv_channels =
// hidden/heads, moe_ffn_hidden_size = ffn_hidden_size, expert_tensor_parallel_size = tp,
// add_qkv_bias = add_bias_linear, use_distributed_optimizer <-> sharding strategy),
// moe_layer_freq expansion and rope_scaling completeness.
std::optional<ConfigError> finish_draft(ScenarioDraft& d, const KeyLocations& where);

// validate_scenario, rendered as one ConfigError (first problem; the others' keys listed).
std::optional<ConfigError> check_layout(const Scenario& s, const KeyLocations& where);

}  // namespace lcm::io
