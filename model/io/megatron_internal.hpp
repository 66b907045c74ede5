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

namespace lcm::io {

// --pipeline-model-parallel-layout ("Et*3|(tt|)*6mL", Megatron's PipelineParallelLayerLayout
// syntax) mapped onto lcm's first/last-stage sizes and virtual-stage size. Exact when the
// per-rank layer counts are first/middle.../last with equal virtual chunks; otherwise the
// closest representable split, described in `note`.
struct LayoutMapping {
  int first = 0, last = 0;       // num_layers_in_{first,last}_pipeline_stage (0: even)
  int layers_per_virtual_stage = 0;
  std::vector<int> layout_per_rank;   // transformer layers per pipeline rank, as written
  std::vector<int> modelled_per_rank;  // as lcm models them
  std::string note;               // "" when exact
  bool interleave_dropped = false;  // the layout interleaves but lcm models it without
};
std::variant<LayoutMapping, std::string> map_pipeline_layout(std::string_view layout, int num_layers, int pp);

}  // namespace lcm::io
