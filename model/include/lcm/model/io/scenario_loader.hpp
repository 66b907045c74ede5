// YAML -> specs, in one place. Strict: unknown keys (with the closest valid key named),
// wrong types, missing required fields, out-of-range values and impossible layouts
// (validate_scenario) are ConfigErrors carrying file:line:column of the offending key.
//
// Scenario files (scenarios/*.yaml) have sections `model:`, `training:`, `parallel:`,
// `hardware:` (profile name or path + num_gpus) and optional `flop_convention:`; every
// key is Megatron-Core's field name (docs/scenario-format.md). A Megatron functional-test
// model_config.yaml (with a MODEL_ARGS block) is also accepted, through the importer,
// given the GPU count and hardware profile.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lcm/model/io/config_error.hpp"
#include "lcm/model/specs.hpp"

namespace lcm::io {

// One `--set KEY=VALUE`; KEY is a Megatron-Core field name (section optional:
// `tensor_model_parallel_size=4` or `parallel.tensor_model_parallel_size=4`).
struct Override {
  Override() = default;
  Override(std::string k, std::string v, std::string o = {})
      : key(std::move(k)), value(std::move(v)), origin(std::move(o)) {}
  std::string key;
  std::string value;
  // How the user gave it, for error messages ("--gpus 128"); empty: "--set KEY=VALUE".
  std::string origin;
};
Result<Override> parse_override(const std::string& text);  // "KEY=VALUE"

struct LoadOptions {
  std::vector<Override> overrides;
  // Where hardware profiles named without a path are looked up (default: the
  // hwprofiles/ directory found next to the executable or in the source tree).
  std::vector<std::string> profile_dirs;
  // Profiles loaded before, by the name a scenario gives (`hardware: {profile: h200-sxm}`),
  // taken before any search of the directories; null: none. For callers that load many
  // scenarios against the same few profiles (the fuzz targets, fuzz/fuzz_common.hpp), which
  // would otherwise read and parse the same 13 KB profile for every scenario.
  const std::map<std::string, HardwareSpec, std::less<>>* loaded_profiles = nullptr;
  // For Megatron model_config.yaml inputs (a scenario file carries its own, which these
  // replace when replace_scenario_job is set: the CLI's --gpus / --hw; errors in them then
  // blame "--gpus N" / "--hw NAME").
  int num_gpus = 0;
  std::string hardware;  // profile name or path
  bool replace_scenario_job = false;
  // Where the loader says what it adjusted besides the overrides themselves (dependent
  // keys, Megatron names converted), one line each; null: not reported.
  std::vector<std::string>* notes = nullptr;
  // Where the loader writes the hardware profile reference the loaded scenario used (its
  // `hardware.profile` after overrides, a relative path made absolute against the scenario's
  // directory; `hardware` for Megatron inputs), so that a caller saving the scenario again
  // names the same profile; null: not reported.
  std::string* hardware_ref = nullptr;
};

// `name_or_path`: a file, or the name of a bundled scenario ("default" ->
// scenarios/default.yaml in the data directories, io/data_dir.hpp).
Result<Scenario> load_scenario(const std::string& name_or_path, const LoadOptions& opts = {});
Result<std::string> find_scenario(const std::string& name_or_path);
Result<Scenario> load_scenario_string(const std::string& yaml_text, const std::string& display_name,
                                      const LoadOptions& opts = {});
Result<HardwareSpec> load_hardware_profile(const std::string& path);
Result<HardwareSpec> load_hardware_profile_text(const std::string& yaml_text, const std::string& display_name);

// Rewrites profile text with new values for some keys, keeping every other line (and its
// comments) as it is. `key` is the profile key, dotted inside a block
// ("efficiency.gemm", "nvlink_latency_us", "name"); the value written is `values`'s, in
// the key's unit; `comment`, when given, goes on a comment line above the key. The
// result is reloaded and checked before it is returned.
struct ProfileEdit {
  std::string key;
  std::string comment;
};
Result<std::string> edit_hardware_profile(const std::string& text, const std::string& file, const HardwareSpec& values,
                                          const std::vector<ProfileEdit>& edits);
// The profile text with its `uncertainty:` block replaced by (or, without one, appended as)
// `u`'s; the result is checked by loading it.
Result<std::string> set_profile_uncertainty(const std::string& text, const std::string& file, const OpUncertainty& u);
// Resolve "h200-sxm" or "path/to/h200-sxm.yaml" against the profile directories.
Result<std::string> find_hardware_profile(const std::string& name_or_path,
                                          const std::vector<std::string>& dirs);

// Emit a scenario as YAML in the scenario-file format (round-trips through load_scenario).
std::string scenario_to_yaml(const Scenario& s, const std::string& hardware_ref);

}  // namespace lcm::io
