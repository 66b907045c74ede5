// lcm-exec results JSON (summary.json) as `lcm calibrate` reads it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lcm/planner/calibrate/measurements.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> skipped;
  (void)lcm::calib::parse_exec_summary(text, "summary.json", 8, &skipped);
  return 0;
}
