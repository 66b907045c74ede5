// Scenario YAML -> Scenario: sections, strict keys, overrides, derived defaults, hardware
// profile resolution and layout validation. Megatron model_config.yaml inputs (a top-level
// MODEL_ARGS block) go through the importer with LoadOptions::num_gpus / hardware.
#include "lcm/model/io/scenario_loader.hpp"

#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "lcm/model/io/data_dir.hpp"
#include "lcm/model/io/input_file.hpp"
#include "loader_core.hpp"
#include "megatron_internal.hpp"

namespace lcm::io {

namespace fs = std::filesystem;

Result<Override> parse_override(const std::string& text) {
  const size_t eq = text.find('=');
  const std::string key = trim(text.substr(0, eq == std::string::npos ? text.size() : eq));
  const Loc set_loc{"--set", 0, 0};
  if (eq == std::string::npos || key.empty())
    return error_at(set_loc, key, fmt::format("expected KEY=VALUE (e.g. tensor_model_parallel_size=4), got '{}'", text));
  if (key.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.") != std::string::npos)
    return error_at(set_loc, key, "a key is a Megatron-Core field name: lower-case letters, digits, '_' and '.'");
  const std::string value = trim(text.substr(eq + 1));
  if (value.empty()) return error_at(set_loc, key, "missing value after '='");
  return Override{key, value};
}

namespace {

std::string unknown_key_message(Section section, const std::string& key) {
  // Megatron-LM flag spelling (dashes) for a Megatron-Core key.
  std::string underscored = key;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  if (underscored.rfind("__", 0) == 0) underscored = underscored.substr(2);
  if (underscored != key && find_field(section, underscored))
    return fmt::format("unknown key '{}'; did you mean '{}'? (keys are Megatron-Core field names)", key, underscored);
  for (const FieldSpec* f : fields_named(key))
    if (f->section != section)
      return fmt::format("key '{}' belongs in section '{}:'", key,
                         f->section == Section::kTop ? "top level" : std::string(section_name(f->section)));
  return unknown_message("key", key, section_keys(section));
}

// One mapping of `key: value` pairs (a section or the top level), duplicates rejected.
std::optional<ConfigError> parse_map(const YAML::Node& map, Section section, ScenarioDraft& d, KeyLocations& where,
                                     const std::string& file) {
  std::map<std::string, int> seen;
  for (const auto& kv : map) {
    const Loc loc = loc_of(kv.first.Mark(), file);
    if (!kv.first.IsScalar()) return error_at(loc, "", "expected a key name, got " + describe(kv.first));
    const std::string key = kv.first.Scalar();
    const std::string dotted = dotted_key(section, key);
    if (const auto it = seen.find(key); it != seen.end())
      return error_at(loc, dotted, fmt::format("duplicate key (first given on line {})", it->second));
    seen[key] = loc.line;
    if (section == Section::kTop) {
      if (const auto sec = parse_section(key)) {
        where.sections[key] = loc;
        if (kv.second.IsNull()) continue;  // an empty section: all defaults
        if (!kv.second.IsMap())
          return error_at(loc, key, fmt::format("expected a mapping of {} keys, got {}", key, describe(kv.second)));
        if (auto e = parse_map(kv.second, *sec, d, where, file)) return e;
        continue;
      }
    }
    const FieldSpec* field = find_field(section, key);
    if (!field) return error_at(loc, dotted, unknown_key_message(section, key));
    if (std::string err = field->parse(kv.second, d); !err.empty()) {
      // Sub-key problems of rope_scaling point at the sub-key.
      Loc at = loc;
      if (field->key == "rope_scaling" && kv.second.IsMap())
        for (const auto& sub : kv.second)
          if (err.rfind(sub.first.Scalar() + ":", 0) == 0 || err.find("'" + sub.first.Scalar() + "'") != std::string::npos)
            at = loc_of(sub.first.Mark(), file);
      return error_at(at, dotted, err);
    }
    d.present.insert(dotted);
    where.keys[dotted] = loc;
    if (field->key == "rope_scaling") {
      for (const auto& sub : kv.second) {
        d.present.insert(dotted + "." + sub.first.Scalar());
        where.keys[dotted + "." + sub.first.Scalar()] = loc_of(sub.first.Mark(), file);
      }
    }
  }
  return std::nullopt;
}

Result<HardwareSpec> resolve_hardware(const std::string& ref, const LoadOptions& opts, const fs::path& base_dir,
                                      const KeyLocations& where) {
  if (opts.loaded_profiles)
    if (const auto it = opts.loaded_profiles->find(ref); it != opts.loaded_profiles->end()) {
      if (opts.hardware_ref) *opts.hardware_ref = ref;
      return it->second;
    }
  std::vector<std::string> dirs = opts.profile_dirs;
  std::string name = ref;
  const bool is_path = ref.find('/') != std::string::npos || ref.ends_with(".yaml") || ref.ends_with(".yml");
  if (!base_dir.empty()) {
    if (is_path && fs::path(ref).is_relative() && fs::exists(base_dir / ref)) name = (base_dir / ref).string();
    dirs.push_back((base_dir / ".." / "hwprofiles").lexically_normal().string());
  }
  auto path = find_hardware_profile(name, dirs);
  if (!path) return error_for_key(where, "hardware.profile", path.error().message);
  if (opts.hardware_ref) *opts.hardware_ref = is_path ? fs::absolute(path.value()).lexically_normal().string() : ref;
  return load_hardware_profile(path.value());
}

Result<Scenario> finish(ScenarioDraft& d, KeyLocations& where, const LoadOptions& opts) {
  if (auto e = apply_overrides(opts.overrides, d, where, opts.notes)) return *e;
  if (auto e = finish_draft(d, where)) return *e;
  return d.s;
}

Result<Scenario> load_megatron_config(const std::string& text, const std::string& file, const LoadOptions& opts,
                                      const fs::path& base_dir, const Loc& model_args_loc) {
  if (opts.num_gpus <= 0 || opts.hardware.empty())
    return error_at(model_args_loc, "MODEL_ARGS",
                    "this is a Megatron functional-test model_config.yaml: give the GPU count and the hardware "
                    "profile (lcm: --gpus N --hw h200-sxm; LoadOptions::num_gpus and ::hardware)");
  auto flags = parse_megatron_model_config(text, file);
  if (!flags) return flags.error();
  KeyLocations none;
  none.document = Loc{file, 1, 1};
  auto hw = resolve_hardware(opts.hardware, opts, base_dir.empty() ? fs::current_path() : base_dir, none);
  if (!hw) return hw.error();
  // Functional tests live in test_cases/<group>/<test name>/model_config.yaml.
  std::string name = fs::path(file).stem().string();
  if (fs::path(file).filename() == "model_config.yaml" && !fs::path(file).parent_path().filename().empty())
    name = fs::path(file).parent_path().filename().string();
  auto md = megatron_to_draft(flags.value(), opts.num_gpus, hw.value(), name, Loc{file, 1, 1});
  if (!md) return md.error();
  MegatronDraft& m = md.value();
  auto s = finish(m.draft, m.where, opts);
  if (!s) return s.error();
  if (auto e = check_layout(s.value(), m.where)) return *e;
  return s;
}

Result<Scenario> load_impl(const std::string& text, const std::string& file, const LoadOptions& opts,
                           const fs::path& base_dir) {
  auto doc = parse_yaml(text, file);
  if (!doc) return doc.error();
  const YAML::Node& root = doc.value();
  KeyLocations where;
  where.document = Loc{file, 1, 1};
  if (!root.IsMap())
    return error_at(where.document, "",
                    fmt::format("expected a scenario mapping with name, model, training, parallel and hardware "
                                "sections, got {}",
                                describe(root)));
  for (const auto& kv : root)
    if (kv.first.IsScalar() && kv.first.Scalar() == "MODEL_ARGS")
      return load_megatron_config(text, file, opts, base_dir, loc_of(kv.first.Mark(), file));

  ScenarioDraft d;
  if (auto e = parse_map(root, Section::kTop, d, where, file)) return *e;
  for (const char* sec : {"model", "training", "hardware"})
    if (!where.sections.count(sec)) return error_at(where.document, sec, fmt::format("missing required section '{}:'", sec));
  LoadOptions job = opts;
  if (opts.replace_scenario_job) {
    // The job's GPUs and hardware come before the --set overrides (which may name them too).
    std::vector<Override> first;
    if (opts.num_gpus > 0)
      first.push_back({"hardware.num_gpus", std::to_string(opts.num_gpus), fmt::format("--gpus {}", opts.num_gpus)});
    if (!opts.hardware.empty()) first.push_back({"hardware.profile", opts.hardware, "--hw " + opts.hardware});
    job.overrides.insert(job.overrides.begin(), first.begin(), first.end());
  }
  auto s = finish(d, where, job);
  if (!s) return s.error();
  auto hw = resolve_hardware(d.hardware_profile, opts, base_dir, where);
  if (!hw) return hw.error();
  s.value().hardware = hw.value();
  if (auto e = check_layout(s.value(), where)) return *e;
  return s;
}

// Every input error is a ConfigError; anything thrown below (yaml-cpp, std::filesystem,
// allocation) is turned into one rather than escaping to the caller.
Result<Scenario> guarded(const std::string& file, const std::function<Result<Scenario>()>& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return ConfigError{file, 0, 0, "", std::string("cannot load: ") + e.what()};
  } catch (...) {
    return ConfigError{file, 0, 0, "", "cannot load: unknown error"};
  }
}

}  // namespace

Result<std::string> find_scenario(const std::string& name_or_path) {
  std::error_code ec;
  const bool is_name = !name_or_path.empty() && name_or_path.find('/') == std::string::npos &&
                       !name_or_path.ends_with(".yaml") && !name_or_path.ends_with(".yml");
  if (!is_name || fs::exists(name_or_path, ec)) return name_or_path;
  if (const auto p = find_data(fs::path("scenarios") / (name_or_path + ".yaml"))) return p->string();
  return ConfigError{name_or_path, 0, 0, "",
                     fmt::format("no such file, and no bundled scenario of that name (searched {})",
                                 data_dirs_text("scenarios"))};
}

Result<Scenario> load_scenario(const std::string& name_or_path, const LoadOptions& opts) {
  return guarded(name_or_path, [&]() -> Result<Scenario> {
    auto found = find_scenario(name_or_path);
    if (!found) return found.error();
    const std::string& path = found.value();
    auto text = read_input_file(path, "scenario");
    if (!text) return text.error();
    fs::path base = fs::path(path).parent_path();
    if (base.empty()) base = ".";
    return load_impl(text.value(), path, opts, base);
  });
}

Result<Scenario> load_scenario_string(const std::string& yaml_text, const std::string& display_name,
                                      const LoadOptions& opts) {
  return guarded(display_name, [&] { return load_impl(yaml_text, display_name, opts, fs::path()); });
}

}  // namespace lcm::io
