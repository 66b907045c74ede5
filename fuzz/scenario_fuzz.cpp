// Scenario loader from text (load_scenario_string: scenario files and, with a GPU count and
// profile, Megatron model_config.yaml), plus the writer round trip on every scenario that loads.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = lcm::io::load_scenario_string(text, "fuzz.yaml", lcm::fuzz::load_options());
  if (s) lcm::fuzz::check_round_trip(s.value(), s.value().hardware.name);
  return 0;
}
