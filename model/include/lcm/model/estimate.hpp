// One call, every breakdown: the cost model's single entry point.
#pragma once

#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/specs.hpp"

namespace lcm {

struct Estimate {
  Mesh mesh;
  std::vector<StageLayers> stage_layers;
  ParamCounts params;
  std::vector<GpuParams> gpu_params;  // per pipeline stage
  Flops flops;
  Memory memory;
  Comm comm;
};

// Precondition: validate_scenario(s) is empty (callers report problems first).
Estimate estimate(const Scenario& s);

}  // namespace lcm
