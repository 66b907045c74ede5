// Private: the scenario-file schema as one table. Each entry names a section and a key
// (Megatron-Core spelling), parses a YAML node into the scenario under construction and
// emits the value back. The loader (files and --set overrides), the writer and the
// documentation all follow this table, so a key exists in one place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "lcm/model/specs.hpp"
#include "yaml_read.hpp"

namespace lcm::io {

enum class Section { kTop, kModel, kTraining, kParallel, kHardware, kFlopConvention };
inline constexpr Section kAllSections[] = {Section::kTop,      Section::kModel,    Section::kTraining,
                                           Section::kParallel, Section::kHardware, Section::kFlopConvention};
std::string_view section_name(Section s);  // "" for top-level keys
std::optional<Section> parse_section(std::string_view name);

// A scenario being loaded: values parsed so far plus what only the loader needs.
struct ScenarioDraft {
  Scenario s;
  std::string hardware_profile;  // hardware.profile as written (name or path)
  // moe_layer_freq as written; expanded once num_layers is final (after overrides).
  std::variant<std::monostate, int64_t, std::vector<int>> moe_layer_freq;
  std::set<std::string> present;  // dotted keys given explicitly ("model.hidden_size")
};

struct FieldSpec {
  Section section;
  std::string_view key;
  bool required = false;
  // Parse `n` into the draft; returns "" or what was expected.
  std::function<std::string(const YAML::Node& n, ScenarioDraft& d)> parse;
  // The value as a YAML node; empty function (or an undefined node): not written by
  // scenario_to_yaml.
  std::function<YAML::Node(const Scenario& s)> emit;
  // Enumerations (and other string knobs): values for the tests that vary every knob; null otherwise.
  std::vector<std::string> (*values)() = nullptr;
};

const std::vector<FieldSpec>& scenario_fields();
const FieldSpec* find_field(Section section, std::string_view key);
// Every field with this key in any section (bare `--set KEY=VALUE`, wrong-section hints).
std::vector<const FieldSpec*> fields_named(std::string_view key);
// The keys of one section, for suggestions.
std::vector<std::string> section_keys(Section section);
// "model.hidden_size"; top-level keys have no prefix ("name").
std::string dotted_key(Section section, std::string_view key);

// Megatron names --set accepts besides the scenario's own keys (Megatron-Core config or
// Megatron-LM argument names that lcm spells differently), and how each is read.
enum class AliasKind : uint8_t {
  kRename,                // the same value under lcm's key
  kVirtualStages,         // a virtual stage count: layers per pipeline rank / value (null: none)
  kRecomputeActivations,  // true: recompute_granularity selective; false: none
};
struct FieldAlias {
  std::string_view name;  // "virtual_pipeline_model_parallel_size"
  std::string_view key;   // lcm's dotted key it sets
  AliasKind kind;
};
const std::vector<FieldAlias>& field_aliases();
const FieldAlias* find_alias(std::string_view name);  // bare or with lcm's section ("parallel.")

// Sub-keys of model.rope_scaling.
inline constexpr std::string_view kRopeScalingKeys[] = {"type", "factor", "original_max_position_embeddings"};

// Expand moe_layer_freq (int N: layer i is MoE iff i % N == 0; list of 0/1) against
// num_layers into ModelSpec::moe_layer_pattern ({} when every layer is MoE by N == 1).
// Returns "" or the problem.
std::string expand_moe_layer_freq(ScenarioDraft& d);

}  // namespace lcm::io
