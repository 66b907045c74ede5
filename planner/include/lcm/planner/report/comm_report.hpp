// Report of `lcm comm`: one layout's communication per collective and per parallel
// dimension (bytes, time, exposed vs hidden, intra- vs inter-node), as tables, CSV (one
// row per collective) and JSON. Renders plan::CommBreakdown only.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/planner/report/table.hpp"
#include "lcm/planner/search/comm_breakdown.hpp"

namespace lcm::report {

inline constexpr int kCommSchemaVersion = 1;

nlohmann::ordered_json comm_json(const Scenario& s, const plan::CommBreakdown& c);
std::vector<Table> comm_tables(const Scenario& s, const plan::CommBreakdown& c);
Table comm_csv_table(const Scenario& s, const plan::CommBreakdown& c);

}  // namespace lcm::report
