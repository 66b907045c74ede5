// Megatron importer from a functional-test model_config.yaml (MODEL_ARGS block), as
// `lcm import megatron --gpus 64 --hw h200-sxm model_config.yaml`; every scenario imported
// must round-trip the writer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "lcm/model/io/megatron_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto flags = lcm::io::parse_megatron_model_config(text, "model_config.yaml");
  if (!flags) return 0;
  auto r = lcm::io::import_megatron_report(flags.value(), 64, lcm::fuzz::h200(), "model_config");
  if (r) lcm::fuzz::check_round_trip(r.value().scenario, "h200-sxm");
  return 0;
}
