// Scenario -> scenario-file YAML. Every key of the schema table is written explicitly
// (derived values included), so load_scenario(scenario_to_yaml(s)) reproduces s.
#include <fmt/format.h>

#include "lcm/model/io/scenario_loader.hpp"
#include "scenario_fields.hpp"

namespace lcm::io {

std::string scenario_to_yaml(const Scenario& s, const std::string& hardware_ref) {
  YAML::Emitter out;
  out << YAML::Comment(fmt::format("lcm scenario (keys: docs/scenario-format.md)")) << YAML::Newline;
  out << YAML::BeginMap;
  for (const FieldSpec& f : scenario_fields())
    if (f.section == Section::kTop && f.emit) out << YAML::Key << std::string(f.key) << YAML::Value << f.emit(s);
  for (Section sec : kAllSections) {
    if (sec == Section::kTop) continue;
    out << YAML::Key << std::string(section_name(sec)) << YAML::Value << YAML::BeginMap;
    if (sec == Section::kHardware) out << YAML::Key << "profile" << YAML::Value << hardware_ref;
    for (const FieldSpec& f : scenario_fields()) {
      if (f.section != sec || !f.emit) continue;
      const YAML::Node v = f.emit(s);
      if (v.IsDefined()) out << YAML::Key << std::string(f.key) << YAML::Value << v;  // undefined: left out
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace lcm::io
