// nccl-tests logs as `lcm calibrate` reads them (the collective from the log's header, or
// else from the file name: here none, so a log without the header line is rejected).
#include <cstddef>
#include <cstdint>
#include <string>

#include "lcm/planner/calibrate/measurements.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)lcm::calib::parse_nccl_tests_log(text, "nccl.txt", 8);
  return 0;
}
