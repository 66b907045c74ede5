// Private: the Megatron importer's pieces used by the scenario loader (MODEL_ARGS inputs)
// and by the public import_megatron.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "lcm/model/io/megatron_import.hpp"
#include "loader_core.hpp"

namespace lcm::io {

// Flags -> scenario draft (not yet finished/validated) with each spec key's location (the
// flag that set it) and the importer's notes on approximations.
struct MegatronDraft {
  ScenarioDraft draft;
  KeyLocations where;
  std::vector<std::string> notes;
  std::vector<std::string> ignored;  // accepted flags without a cost effect
};
Result<MegatronDraft> megatron_to_draft(const std::vector<MegatronFlag>& flags, int num_gpus,
                                        const HardwareSpec& hardware, const std::string& name,
                                        const Loc& document);

// The Megatron flag a spec key comes from ("parallel.tensor_model_parallel_size" ->
// "--tensor-model-parallel-size"), for error messages about derived problems.
std::string flag_for_key(const std::string& dotted);

}  // namespace lcm::io
