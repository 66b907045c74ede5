// One call, every breakdown: the cost model's single entry point.
#pragma once

#include <vector>

#include "lcm/model/comm.hpp"
#include "lcm/model/flops.hpp"
#include "lcm/model/memory.hpp"
#include "lcm/model/mesh.hpp"
#include "lcm/model/params.hpp"
#include "lcm/model/specs.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/model/uncertainty.hpp"

namespace lcm {

struct Estimate {
  Mesh mesh;
  std::vector<StageLayers> stage_layers;
  ParamCounts params;
  std::vector<GpuParams> gpu_params;  // per pipeline stage
  Flops flops;
  Memory memory;
  Comm comm;
  bool has_time = false;
  StepTime time;  // step time, throughput, MFU and breakdown (when has_time)
  StepBand band;  // the step time's error band (when has_time; model/uncertainty.hpp)
};

struct EstimateOptions {
  bool with_time = true;  // build the op schedule and the step time
};

// Precondition: validate_scenario(s) is empty (callers report problems first).
Estimate estimate(const Scenario& s, const EstimateOptions& opts = {});

}  // namespace lcm
