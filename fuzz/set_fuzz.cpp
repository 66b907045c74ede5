// `--set KEY=VALUE` overrides (one per input line) applied to the bundled default scenario,
// as `lcm estimate scenarios/default.yaml --set ...` does: parse_override, the load with the
// overrides, the estimate of the result, and the writer round trip.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_common.hpp"
#include "lcm/model/estimate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string base = lcm::fuzz::bundled_text("scenarios/default.yaml");
  lcm::io::LoadOptions opts = lcm::fuzz::load_options();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(in, line);) {
    auto o = lcm::io::parse_override(line);
    if (!o) return 0;
    opts.overrides.push_back(o.value());
  }
  auto s = lcm::io::load_scenario_string(base, "default.yaml", opts);
  if (!s) return 0;
  (void)lcm::estimate(s.value());
  lcm::fuzz::check_round_trip(s.value(), s.value().hardware.name);
  return 0;
}
