// Shared by the libFuzzer targets (fuzz/*.cpp): the bundled files a target starts from and
// the one way a target reports a broken property (abort, so libFuzzer keeps the input).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>

#include "lcm/model/io/scenario_loader.hpp"

namespace lcm::fuzz {

inline std::string source_path(std::string_view rel) { return std::string(LCM_SOURCE_DIR) + "/" + std::string(rel); }

// A bundled file (read once at start-up; a missing file is a broken checkout, not an input).
inline std::string bundled_text(std::string_view rel) {
  std::ifstream in(source_path(rel), std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", source_path(rel).c_str());
    std::abort();
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every bundled profile (hwprofiles/*.yaml), loaded once at start-up, by name: a scenario that
// names one takes it from here instead of reading and parsing the same file again for every
// input (most of a valid input's time; profile_fuzz fuzzes the profile reader itself).
inline const std::map<std::string, HardwareSpec, std::less<>>& bundled_profiles() {
  static const std::map<std::string, HardwareSpec, std::less<>> profiles = [] {
    std::map<std::string, HardwareSpec, std::less<>> m;
    for (const auto& e : std::filesystem::directory_iterator(source_path("hwprofiles"))) {
      if (e.path().extension() != ".yaml") continue;
      auto r = io::load_hardware_profile(e.path().string());
      if (!r) {
        std::fprintf(stderr, "fuzz: %s\n", r.error().str().c_str());
        std::abort();
      }
      m.emplace(e.path().stem().string(), r.value());
    }
    return m;
  }();
  return profiles;
}

// Load options of every target: profiles from the source tree's hwprofiles/ (the bundled ones
// loaded once), and a GPU count and profile for Megatron model_config.yaml inputs (as
// `lcm estimate --gpus 64 --hw h200-sxm`).
inline io::LoadOptions load_options() {
  io::LoadOptions o;
  o.profile_dirs = {source_path("hwprofiles")};
  o.loaded_profiles = &bundled_profiles();
  o.num_gpus = 64;
  o.hardware = "h200-sxm";
  return o;
}

inline const HardwareSpec& h200() { return bundled_profiles().at("h200-sxm"); }

// A property that must hold for every input: print what broke and abort (a finding).
[[noreturn]] inline void property_failed(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "\n==lcm-fuzz== PROPERTY FAILED: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

// The round-trip property of the scenario writer: a scenario that loaded is written, loads
// again, and writes the same text (every key is written, so equal texts mean equal specs).
inline void check_round_trip(const Scenario& s, const std::string& hardware_ref) {
  const std::string first = io::scenario_to_yaml(s, hardware_ref);
  auto again = io::load_scenario_string(first, "roundtrip.yaml", load_options());
  if (!again) property_failed("written scenario does not load again", again.error().str() + "\n--- written:\n" + first);
  const std::string second = io::scenario_to_yaml(again.value(), hardware_ref);
  if (second != first)
    property_failed("scenario changed in a write/load round trip",
                    "--- first write:\n" + first + "--- second write:\n" + second);
}

}  // namespace lcm::fuzz
