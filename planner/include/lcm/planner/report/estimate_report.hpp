// Reports of one estimate: JSON (schema in docs/estimate-json.md), terminal / Markdown
// tables, and a long-format CSV (section,stage,item,value,unit). They only render
// model::Estimate; nothing here computes a formula.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "lcm/model/estimate.hpp"
#include "lcm/planner/report/table.hpp"

namespace lcm::report {

inline constexpr int kEstimateSchemaVersion = 1;

nlohmann::ordered_json estimate_json(const Scenario& s, const Estimate& e);
std::vector<Table> estimate_tables(const Scenario& s, const Estimate& e);
Table estimate_long_table(const Scenario& s, const Estimate& e);  // the CSV rendering
// The memory verdict in words, its own number first: "143.49 on stage 1 of HBM 140.40: DOES NOT
// FIT (peak 139.77, range 136.05-143.49 on that stage; allocated 120.00)" (GiB).
std::string memory_verdict(const Memory& mem);
// The named terms of one stage's memory in report order, as the JSON names them ("weights" ...
// "fragmentation"): the one list every report of memory terms takes its names from.
std::vector<std::pair<std::string, double>> memory_terms(const StageMemory& m);

}  // namespace lcm::report
