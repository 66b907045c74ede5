// Helpers shared by the planner's sources (not installed).
#pragma once

#include "lcm/model/memory.hpp"
#include "lcm/model/step_time.hpp"
#include "lcm/planner/search/plan.hpp"

namespace lcm::plan {

// Metrics fields from a Memory / StepTime: the one place both the evaluator and
// metrics_of_estimate() take them from.
void memory_metrics(const Memory& mem, Metrics& m);
void time_metrics(const StepTime& t, Metrics& m);

}  // namespace lcm::plan
