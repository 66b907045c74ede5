// Rendering of the scaling table (lcm scaling): per layer and per step FLOPs split,
// activation memory, and the attention-vs-MLP crossover marked.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/scaling.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

std::vector<Table> scaling_tables(const Scenario& s, const std::vector<ScalingRow>& rows,
                                  const Crossover& x);
Table scaling_csv_table(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x);
nlohmann::ordered_json scaling_json(const Scenario& s, const std::vector<ScalingRow>& rows, const Crossover& x);

}  // namespace lcm::report
