// Megatron importer from a command line: the input is argv (arguments separated by NUL),
// joined as `lcm import megatron --gpus 64 --hw h200-sxm -- FLAGS...` joins them; a
// text input without NUL is a run.sh. Every scenario imported must round-trip the writer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "lcm/model/io/megatron_import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::replace(text.begin(), text.end(), '\0', ' ');
  auto flags = lcm::io::parse_megatron_command_line(text, "<command line>");
  if (!flags) return 0;
  auto r = lcm::io::import_megatron_report(flags.value(), 64, lcm::fuzz::h200(), "imported");
  if (r) lcm::fuzz::check_round_trip(r.value().scenario, "h200-sxm");
  return 0;
}
