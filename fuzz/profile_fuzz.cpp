// Hardware profile loader from text, plus the calibration's profile editor on every profile
// that loads: rewriting a key present in the text with the loaded value must succeed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto hw = lcm::io::load_hardware_profile_text(text, "fuzz.yaml");
  if (!hw) return 0;
  for (const char* key : {"name", "efficiency.gemm", "nvlink_latency_us"}) {
    auto edited = lcm::io::edit_hardware_profile(text, "fuzz.yaml", hw.value(), {{key, "edited"}});
    if (!edited && edited.error().message != "key not found in the profile")
      lcm::fuzz::property_failed(std::string("editing '") + key + "' of a profile that loads failed",
                                 edited.error().str());
  }
  return 0;
}
